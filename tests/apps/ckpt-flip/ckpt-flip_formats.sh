#!/bin/bash
# Formats are told by their content: an HDF5 file named .pt, or behind a 512-byte user block, is
# HDF5; a torch.save zip, an npz, a .npy and a safetensors file named .h5 go through their own
# adapters; unknown bytes are exit 4 naming the file; --format forces an adapter and an unknown
# --format value is exit 2.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-formats
FLIP=$1

$PY - "$T" <<'PYEOF'
import sys, os, json, struct, zipfile, io, h5py, numpy as np
T = sys.argv[1]
r = np.random.default_rng(5)
w = r.standard_normal((32, 16)).astype("f4")
with h5py.File(f"{T}/ckpt.pt", "w") as f:           # HDF5 under a torch-like name
    f["model/w"] = w
with h5py.File(f"{T}/ub.h5", "w", userblock_size=512) as f:
    f["model/w"] = w
with open(f"{T}/ub.h5", "r+b") as f:                # the user block starts like a zip
    f.write(b"PK\x03\x04")
with zipfile.ZipFile(f"{T}/torch.h5", "w", zipfile.ZIP_STORED) as z:  # an empty state dict
    z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
buf = io.BytesIO(); np.save(buf, w)
with zipfile.ZipFile(f"{T}/arrays.h5", "w", zipfile.ZIP_STORED) as z:
    z.writestr("w.npy", buf.getvalue())
np.save(f"{T}/one.npy", w); os.rename(f"{T}/one.npy", f"{T}/one.h5")
hdr = json.dumps({"w": {"dtype": "F32", "shape": [32, 16], "data_offsets": [0, w.nbytes]}}).encode()
with open(f"{T}/st.h5", "wb") as f:
    f.write(struct.pack("<Q", len(hdr)) + hdr + w.tobytes())
with open(f"{T}/junk.h5", "wb") as f:
    f.write(b"this is no checkpoint at all\n" * 10)
PYEOF

# HDF5 whatever the name, and after a user block whose first bytes look like a zip.
for f in ckpt.pt ub.h5; do
  run "$FLIP" inspect "$T/$f"
  grep -q "w  f32\[32,16\]" "$T/stdout" || { cat "$T/stdout"; fail "inspect $f lists no /model/w"; }
  grep -qx "format: hdf5" "$T/stdout" || { cat "$T/stdout"; fail "inspect $f does not say the detected format hdf5"; }
  before=$(sha "$T/$f")
  run "$FLIP" inject "$T/$f" --in-place --log "$T/$f.log" --flips 5 --seed 1
  run "$FLIP" revert "$T/$f" --log "$T/$f.log" --format hdf5
  [ "$(sha "$T/$f")" = "$before" ] || fail "revert of $f is not byte-identical"
done

# The other formats go through their adapters whatever the name: inspect lists the tensor, an
# in-place injection and its revert leave the file byte-identical; a zip whose pickle holds no
# tensor has nothing to select (exit 5, the file unchanged).
for pair in arrays.h5:npz one.h5:npy st.h5:safetensors; do
  f=${pair%%:*}
  before=$(sha "$T/$f")
  run "$FLIP" inspect "$T/$f"
  grep -q "f32\[32,16\]" "$T/stdout" || { cat "$T/stdout"; fail "inspect $f lists no f32[32,16] tensor"; }
  # The format detected from the content (one line; --json carries it), whatever the name.
  [ "$(grep -c "^format: " "$T/stdout")" = 1 ] && grep -qx "format: ${pair##*:}" "$T/stdout" ||
    { cat "$T/stdout"; fail "inspect $f does not say the detected format ${pair##*:}"; }
  run "$FLIP" inspect "$T/$f" --json
  [ "$($PY -c 'import json, sys; print(json.load(sys.stdin)["format"])' < "$T/stdout")" = "${pair##*:}" ] ||
    fail "inspect --json of $f does not carry the format ${pair##*:}"
  run "$FLIP" inject "$T/$f" --in-place --log "$T/$f.log" --flips 5 --seed 1
  [ "$(sha "$T/$f")" != "$before" ] || fail "inject $f changed nothing"
  run "$FLIP" revert "$T/$f" --log "$T/$f.log"
  [ "$(sha "$T/$f")" = "$before" ] || fail "revert of $f is not byte-identical"
done
before=$(sha "$T/torch.h5")
run "$FLIP" inspect "$T/torch.h5"
grep -qx "format: torch" "$T/stdout" || { cat "$T/stdout"; fail "inspect torch.h5 does not say the detected format torch"; }
expect_rc 5 "$FLIP" inject "$T/torch.h5" --in-place --log "$T/x.log" --flips 1 --seed 1
[ "$(sha "$T/torch.h5")" = "$before" ] && [ ! -e "$T/x.log" ] || fail "torch.h5 changed, or a log was left"

# Unknown content: exit 4 naming the file. A forced format: that adapter, whatever the content.
expect_err 4 junk.h5 "$FLIP" inspect "$T/junk.h5"
grep -q "unknown file format" "$T/stderr" || { cat "$T/stderr"; fail "junk: no 'unknown file format'"; }
expect_err 4 ckpt.pt "$FLIP" inspect "$T/ckpt.pt" --format torch
grep -q "zip:" "$T/stderr" || { cat "$T/stderr"; fail "--format torch did not force the torch adapter"; }
expect_err 4 torch.h5 "$FLIP" scan "$T/torch.h5" --format hdf5
grep -q "not an HDF5 file" "$T/stderr" || fail "--format hdf5 on a zip: not the HDF5 adapter's error"
run "$FLIP" scan "$T/ckpt.pt" --format auto
expect_rc 2 "$FLIP" inspect "$T/ckpt.pt" --format pickle
grep -q -- "--format" "$T/stderr" || fail "a bad --format value is not named"
# --raw flips bytes of any file: the adapters are not involved.
run "$FLIP" inject "$T/st.h5" -o "$T/st-raw.h5" --raw --log "$T/raw.log" --flips 3 --seed 2
echo "PASS"
