#!/bin/bash
# Interop: files written by /usr/bin/python3 + h5py (state_dict, Keras groups, gzip, fp16, fp64,
# ints, 5-D, big-endian); inject with several models; h5py reads everything, attributes unchanged,
# only the logged bits differ; revert restores identical datasets.
set -euo pipefail
FLIP=$1
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
T=$(mktemp -d /tmp/inject-interop-XXXXXX)
trap 'rm -rf "$T"' EXIT
$PY "$HERE/h5py_fixtures.py" "$T/sd.h5"
"$FLIP" inspect "$T/sd.h5" | tee "$T/inspect.txt"
grep -q "strings.*unsupported" "$T/inspect.txt"
grep -q "f32(BE)" "$T/inspect.txt"
for model in flip adjacent:3 random-bits:2 burst stuck-at-1 random-value zero; do
  "$FLIP" inject "$T/sd.h5" -o "$T/out.h5" --seed 11 --flips 4000 --model "$model" --log "$T/log.jsonl" --include '**' > /dev/null
  $PY "$HERE/h5py_check.py" "$T/sd.h5" "$T/out.h5" "$T/log.jsonl"
  # Every dataset kind was hit, including big-endian, 5-D, gzip and nested Keras groups.
  for ds in /big_endian /vol.5d /gzip.weight "/model_weights/dense_1/dense_1/kernel:0" /fc.weight_fp16 /fc.weight_fp64 /embedding.int8; do
    grep -qF "\"dataset\":\"$ds\"" "$T/log.jsonl" || { echo "model $model never hit $ds"; exit 1; }
  done
  "$FLIP" revert "$T/out.h5" --log "$T/log.jsonl" > /dev/null
  "$FLIP" diff "$T/sd.h5" "$T/out.h5" | tail -1 | grep -q identical
done
# Big-endian bit numbering: flipping the sign bit (bit 31) of a BE float negates it in h5py.
"$FLIP" inject "$T/sd.h5" -o "$T/be.h5" --seed 2 --flips 5 --include /big_endian --bits sign --log "$T/be.jsonl" > /dev/null
$PY - "$T/sd.h5" "$T/be.h5" <<'PYEOF'
import sys, h5py, numpy as np
a = h5py.File(sys.argv[1])["big_endian"][()]; b = h5py.File(sys.argv[2])["big_endian"][()]
d = np.nonzero(a != b)[0]
assert len(d) == 5 and np.all(b[d] == -a[d]), (a[d], b[d])
PYEOF
# Counters are excluded by default, included when named.
"$FLIP" inject "$T/sd.h5" --dry-run --seed 1 --flips 2000 | grep -q num_batches_tracked && { echo "counter hit by default"; exit 1; }
"$FLIP" inject "$T/sd.h5" --dry-run --seed 1 --flips 3 --include '*num_batches_tracked' | grep -c num_batches_tracked | grep -q 3
echo "interop OK"
