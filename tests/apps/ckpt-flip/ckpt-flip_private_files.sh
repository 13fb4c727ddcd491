#!/bin/bash
# A checkpoint's owner, group and permissions survive everything ckpt-flip writes: a staged in-place
# edit (a deflated .npz member, a gzip-chunked HDF5 dataset: a copy renamed over the file) and its
# revert keep them exactly; an edited copy (-o) and every flip log are no more readable than their
# input. Run as root, the file is given to nobody:nogroup first, so a copy that kept root's owner
# would show; and nobody, allowed to write a root-owned file but not to give a copy root's owner, is
# refused a staged edit (exit 3, the file unchanged) instead of replacing the file by one of its own.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-private-files
FLIP=$1
attrs() { stat -c '%a %u %g' "$1"; }
mode() { stat -c '%a' "$1"; }

$PY - "$T" <<'PY' || fail "could not write the checkpoints"
import sys, h5py, numpy as np
d = sys.argv[1]
np.savez_compressed(f"{d}/c.npz", w=np.arange(64, dtype="<f4"), b=np.ones(8, dtype="<f4"))
with h5py.File(f"{d}/c.h5", "w") as f:
    f.create_dataset("model/w", data=np.arange(256, dtype="f4").reshape(16, 16), chunks=(4, 16), compression="gzip")
PY

for f in c.npz c.h5; do
  F="$T/$f"
  chmod 0600 "$F"
  [ "$(id -u)" = 0 ] && chown 65534:65534 "$F"
  before=$(attrs "$F")
  # Staged in place: the copy renamed over the file must carry its owner, group and mode.
  run "$FLIP" inject "$F" --in-place --log "$T/$f.jsonl" --flips 3 --seed 5
  [ "$(attrs "$F")" = "$before" ] || fail "$f: inject --in-place changed owner/group/mode from '$before' to '$(attrs "$F")'"
  [ "$(mode "$T/$f.jsonl")" = 600 ] || fail "$f: the in-place flip log of a 0600 file is $(mode "$T/$f.jsonl")"
  run "$FLIP" revert "$F" --log "$T/$f.jsonl"
  [ "$(attrs "$F")" = "$before" ] || fail "$f: revert changed owner/group/mode from '$before' to '$(attrs "$F")'"
  # An edited copy and its log: no more readable than the input (0600 and 0640 inputs).
  for m in 600 640; do
    chmod "$m" "$F"
    rm -f "$T/out-$f" "$T/out-$f.jsonl"
    run "$FLIP" inject "$F" -o "$T/out-$f" --log "$T/out-$f.jsonl" --flips 3 --seed 5
    [ "$(mode "$T/out-$f")" = "$m" ] || fail "$f: the -o copy of a $m file is $(mode "$T/out-$f")"
    [ "$(mode "$T/out-$f.jsonl")" = "$m" ] || fail "$f: the flip log of a $m file is $(mode "$T/out-$f.jsonl")"
  done
done

# A sharded set in a directory: its flip logs follow its files, not the directory (0600 shards in a
# 0755 directory gave a 0644 log), and an -o copy of a 0700 set is a 0700 directory (was 0755).
mkdir "$T/set"
$PY - "$T/set" <<'PY' || fail "could not write the set"
import json, struct, sys
d = sys.argv[1]
index = {"metadata": {}, "weight_map": {}}
for i, name in enumerate(("a", "b")):
    head = json.dumps({name: {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    head += b" " * (-len(head) % 8)
    f = f"m-{i + 1}.safetensors"
    open(f"{d}/{f}", "wb").write(struct.pack("<Q", len(head)) + head + bytes(16))
    index["weight_map"][name] = f
json.dump(index, open(f"{d}/model.safetensors.index.json", "w"))
PY
chmod 0600 "$T"/set/*
chmod 0755 "$T/set"
run "$FLIP" inject "$T/set" --in-place --log "$T/set.jsonl" --flips 3 --seed 5
[ "$(mode "$T/set.jsonl")" = 600 ] || fail "the flip log of a set of 0600 shards is $(mode "$T/set.jsonl")"
run "$FLIP" revert "$T/set" --log "$T/set.jsonl"
chmod 0700 "$T/set"
run "$FLIP" inject "$T/set" -o "$T/set-out" --log "$T/set-out.jsonl" --flips 3 --seed 5
[ "$(mode "$T/set-out")" = 700 ] && [ "$(mode "$T/set-out.jsonl")" = 600 ] ||
  fail "-o of a 0700 set of 0600 shards: directory $(mode "$T/set-out"), log $(mode "$T/set-out.jsonl")"

# Another user who may write the file but not give a copy its owner: the staged edit is refused
# before anything changes (needs root to act as nobody; skipped otherwise).
if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null; then
  S="$T/shared"
  mkdir "$S" && chmod 0777 "$S" && chmod 0711 "$T"
  cp "$T/c.npz" "$S/c.npz" && chown 0:0 "$S/c.npz" && chmod 0666 "$S/c.npz"
  before=$(attrs "$S/c.npz") sum=$(sha "$S/c.npz")
  expect_err 3 "$S/c.npz" setpriv --reuid 65534 --regid 65534 --clear-groups \
    "$FLIP" inject "$S/c.npz" --in-place --log "$S/c.jsonl" --flips 3 --seed 5
  grep -q "owned by uid 0" "$T/stderr" || fail "the refusal does not name the owner: $(cat "$T/stderr")"
  [ "$(attrs "$S/c.npz")" = "$before" ] && [ "$(sha "$S/c.npz")" = "$sum" ] || fail "the refused edit changed $S/c.npz"
  [ "$(ls -A "$S")" = c.npz ] || fail "the refused edit left files behind: $(ls -A "$S")"
else
  echo "SKIP: the other-user case needs root and setpriv"
fi
echo PASS
