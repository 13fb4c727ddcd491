#!/bin/bash
# An in-place edit of a zip checkpoint (stored .npz members, torch.save storages) writes the words,
# then each touched member's CRC-32. The states a kill can leave, built without timing luck:
# - killed after the words, before the CRCs: the words flipped, the CRCs the original's, the log
#   without its footer (`inject -o --keep-crc`, the footer cut);
# - a revert killed after restoring every word, before its CRCs: the original words under the
#   flipped file's CRCs (`revert --keep-crc` of a finished injection).
# `revert` gives the original file back byte for byte, and zipfile and the format's loader accept
# it (before: the CRC was patched by the change from the stale value: 24-32 bytes off, BadZipFile).
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-zip-crc-undo
FLIP=$1
$PY - "$T" <<'PY' || fail "could not write the inputs"
import sys, numpy as np, torch
d = sys.argv[1]
rng = np.random.default_rng(1)
np.savez(f"{d}/s.npz", a=rng.standard_normal(20000).astype("f4"), b=rng.standard_normal((50, 40)).astype("f4"))
torch.save({"w": torch.randn(20000), "v": torch.randn(50, 40)}, f"{d}/t.pt")
PY
loads() {  # loads FILE: zipfile's CRC check and the format's own loader accept it
  $PY - "$1" <<'PY'
import sys, zipfile, numpy as np, torch
f = sys.argv[1]
bad = zipfile.ZipFile(f).testzip()
if bad: sys.exit(f"{f}: member {bad} fails its CRC-32")
if f.endswith(".npz"):
    z = np.load(f); [z[k] for k in z.files]
else:
    torch.load(f)
PY
}
for f in s.npz t.pt; do
  orig=$(sha "$T/$f")
  # Killed after the words, before the CRCs.
  run "$FLIP" inject "$T/$f" -o "$T/k-$f" --keep-crc --log "$T/k.log" --flips 100 --seed 9
  head -n -1 "$T/k.log" > "$T/cut.log"
  grep -q '"type":"footer"' "$T/cut.log" && fail "$f: the cut log still has its footer"
  run "$FLIP" revert "$T/k-$f" --log "$T/cut.log"
  [ "$(sha "$T/k-$f")" = "$orig" ] || fail "$f: revert after a kill before the CRCs is not the original: $(cmp -l "$T/k-$f" "$T/$f" | wc -l) bytes differ"
  loads "$T/k-$f" || fail "$f: not loadable after the revert"
  # A revert killed after every word, before its CRCs.
  run "$FLIP" inject "$T/$f" -o "$T/r-$f" --log "$T/r.log" --flips 100 --seed 9
  run "$FLIP" revert "$T/r-$f" --log "$T/r.log" --keep-crc
  [ "$(sha "$T/r-$f")" = "$orig" ] && fail "$f: revert --keep-crc left the original CRCs (nothing to test)"
  run "$FLIP" revert "$T/r-$f" --log "$T/r.log" --force
  [ "$(sha "$T/r-$f")" = "$orig" ] || fail "$f: revert after a killed revert is not the original: $(cmp -l "$T/r-$f" "$T/$f" | wc -l) bytes differ"
  loads "$T/r-$f" || fail "$f: not loadable after the second revert"
  rm -f "$T/k-$f" "$T/r-$f" "$T"/*.log
done
echo "ok: revert restores zip checkpoints byte for byte whatever CRCs a kill left"
