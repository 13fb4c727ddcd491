#!/bin/bash
# Memory follows the input's real content (docs/reference/formats.md): a 185-byte .npz whose deflated member
# declares 4 GiB (it took 4.2 GB before inflating), a safetensors header of one 10 M-entry shape
# (1.9 GB as a value tree), and a 13 KB torch.save whose memoised 4000-byte key is reused at 60
# levels above 4000 views (names of gigabytes) are each refused with exit 4 and one line naming the
# file, by inspect, inject -o and inject --dry-run, within 2 GiB of address space and 60 s. A valid
# file goes through under the same limits, so the limit is not what refuses them.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-input-bounds
FLIP=$1
EXPECT_TIMEOUT=60

$PY - "$T" <<'PY' || fail "could not write the files"
import io, struct, sys, zipfile, zlib
import numpy as np, torch
d = sys.argv[1]
# The member's .npy header declares (4 GiB - 192) bytes of data; the deflate stream holds the header alone.
n = (0xFFFFFFFF - 64 - 128) // 4
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % n
hdr += " " * (128 - 10 - len(hdr) - 1) + "\n"
npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode()
z = io.BytesIO()
with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
    zf.writestr("w.npy", npy)
b = bytearray(z.getvalue())
declared = len(npy) + 4 * n
struct.pack_into("<I", b, 22, declared)                    # local header: uncompressed size
struct.pack_into("<I", b, b.find(b"PK\x01\x02") + 24, declared)  # central directory: the same
open(f"{d}/declared.npz", "wb").write(bytes(b))
m = 10_000_000
head = b'{"w": {"dtype": "U8", "shape": [' + b"1," * (m - 1) + b'1], "data_offsets": [0, 1]}}'
head += b" " * (-len(head) % 8)
open(f"{d}/shape.safetensors", "wb").write(struct.pack("<Q", len(head)) + head + b"\0")
key = "k" * 4000
obj = [torch.zeros(1)] * 4000
for _ in range(60):
    obj = {key: obj}
torch.save(obj, f"{d}/names.pt")
np.savez_compressed(f"{d}/ok.npz", w=np.arange(1 << 16, dtype="<f4"))
PY

# bounded ARGS: ckpt-flip ARGS within 2 GiB of address space (a program, so that expect_rc's
# timeout can run it).
bounded=(bash -c 'ulimit -v 2097152 && exec "$0" "$@"' "$FLIP")
while IFS='|' read -r f pattern; do
  F="$T/$f"
  for cmd in "inspect" "inject -o $T/out --log $T/out.jsonl --flips 1 --seed 1" "inject --dry-run --flips 1 --seed 1"; do
    # shellcheck disable=SC2086
    set -- $cmd
    expect_err 4 "$F" "${bounded[@]}" "$1" "$F" "${@:2}"
    grep -q -- "$pattern" "$T/stderr" || fail "$f: $cmd: the line does not say '$pattern': $(cut -c1-300 "$T/stderr")"
    [ "$(wc -c < "$T/stderr")" -le 600 ] || fail "$f: $cmd: an error line of $(wc -c < "$T/stderr") bytes"
    [ ! -e "$T/out" ] && [ ! -e "$T/out.jsonl" ] || fail "$f: $cmd left an output"
  done
done <<CASES
declared.npz|declares [0-9]* bytes, more than its [0-9]* deflated bytes can hold
shape.safetensors|JSON array of more than 1024 values
names.pt|tensor names of more than [0-9]* MiB
CASES
expect_rc 0 "${bounded[@]}" inject "$T/ok.npz" -o "$T/ok-out.npz" --log "$T/ok.jsonl" --flips 100 --seed 1
echo PASS
