#!/bin/bash
# diff and scan read a tensor in slabs of about 32 MiB whatever its shape: a row larger than the slab
# is split (a box over the last dimensions, a flat range of a byte-run format), a chunked HDF5
# dataset is read as boxes of whole chunks over the last dimensions. Before, a slab was at least
# one row, or chunks[0] rows: a [1, N] safetensors tensor of 192 MiB cost diff 2 x 192 MiB, an HDF5
# (8192, 4096) f32 dataset with chunks (8192, 64) (one chunk row = all of it) 2 x 128 MiB for diff
# and 128 MiB for scan. The inputs are small on disk (a sparse file, gzip chunks of zeros); the
# counts are checked against numpy/h5py.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-diff-memory
FLIP=$1
$PY - "$T" <<'PYEOF' || fail "could not write the inputs"
import sys, json, struct, os, numpy as np, h5py
T = sys.argv[1]
n = 48 << 20  # [1, n] f32: 192 MiB
h = json.dumps({"w": {"dtype": "F32", "shape": [1, n], "data_offsets": [0, 4 * n]}}).encode()
for name in ("a", "b"):
    with open(f"{T}/{name}.st", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + 4 * n)  # a hole: zeros, no disk
with open(f"{T}/b.st", "r+b") as f:  # two elements differ: the first and the last
    f.seek(8 + len(h)); f.write(np.float32(1).tobytes())
    f.seek(8 + len(h) + 4 * (n - 1)); f.write(np.float32(2).tobytes())
for name in ("a", "b"):
    with h5py.File(f"{T}/{name}.h5", "w") as f:
        d = f.create_dataset("w", shape=(8192, 4096), dtype="f4", chunks=(8192, 64), compression="gzip", fillvalue=0)
        z = np.zeros((8192, 64), "f4")
        for c in range(0, 4096, 64):
            d[:, c:c + 64] = z
        if name == "b":  # one element differs
            d[5, 4000] = 3
PYEOF
rss() {  # rss CMD...: the peak RSS of CMD in KiB (exit 0 or 10 wanted)
  local rc=0
  /usr/bin/time -f %M -o "$T/rss" "$@" > "$T/stdout" 2> "$T/stderr" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 10 ] || { cat "$T/stdout" "$T/stderr"; fail "exit $rc: $*"; }
  tail -1 "$T/rss"
}
json() { $PY -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }
MIB=1024
base=$(rss "$FLIP" inspect "$T/a.st")
d1=$(rss "$FLIP" diff "$T/a.st" "$T/b.st" --json)
[ "$(json "$T/stdout" "[(d['dataset'], d['differing']) for d in j['datasets']]")" = "[('/w', 2)]" ] || fail "[1, N] diff: $(cat "$T/stdout")"
hbase=$(rss "$FLIP" inspect "$T/a.h5")
d2=$(rss "$FLIP" diff "$T/a.h5" "$T/b.h5" --json)
[ "$(json "$T/stdout" "[(d['dataset'], d['differing']) for d in j['datasets']]")" = "[('/w', 1)]" ] || fail "chunked diff: $(cat "$T/stdout")"
$PY -c "
import h5py, sys
with h5py.File(sys.argv[1]) as a, h5py.File(sys.argv[2]) as b:
    assert int((a['w'][()] != b['w'][()]).sum()) == 1" "$T/a.h5" "$T/b.h5" || fail "h5py counts another number of differing elements"
s2=$(rss "$FLIP" scan "$T/b.h5")
echo "peak RSS (KiB): inspect $base, diff [1,N] $d1; inspect h5 $hbase, diff chunked $d2, scan chunked $s2"
# Two slabs of 32 MiB (and HDF5's one decompressed 2 MiB chunk) above what opening the files costs.
[ "$d1" -le $((base + 100 * MIB)) ] || fail "diff of a [1, N] tensor holds more than two slabs: $d1 KiB (inspect $base KiB)"
[ "$d2" -le $((hbase + 100 * MIB)) ] || fail "diff of a chunked dataset holds more than two slabs: $d2 KiB (inspect $hbase KiB)"
[ "$s2" -le $((hbase + 64 * MIB)) ] || fail "scan of a chunked dataset holds more than a slab: $s2 KiB (inspect $hbase KiB)"
echo "ok: diff and scan memory is bounded by a slab"
