#!/bin/bash
# ckpt-flip diff --json: a dataset that is not compared element by element (another shape, another
# dtype, only in one file) has null counts, not 0 ("differing": 0 beside "status": "shape-mismatch"
# would read as equal to a script); a compared one keeps its numbers.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-diff-json
FLIP=$1
$PY - "$T" <<'PYEOF'
import sys, h5py, numpy as np
T = sys.argv[1]
with h5py.File(f"{T}/a.h5", "w") as f:
    f["model/s"] = np.ones(8, np.float32); f["model/t"] = np.ones(4, np.float32)
    f["model/u"] = np.ones(4, np.float32); f["model/v"] = np.ones(4, np.float32)
with h5py.File(f"{T}/b.h5", "w") as f:
    f["model/s"] = np.ones(9, np.float32); f["model/t"] = np.ones(4, np.float64)
    v = np.ones(4, np.float32); v[1] = 2; f["model/v"] = v
PYEOF
expect_rc 0 "$FLIP" diff "$T/a.h5" "$T/b.h5" --json
$PY - "$T/stdout" <<'PYEOF' || fail "diff --json: $(cat "$T/stdout")"
import json, sys
r = json.load(open(sys.argv[1]))
d = {x["dataset"]: x for x in r["datasets"]}
assert r["identical"] is False
for name, status in (("/model/s", "shape-mismatch"), ("/model/t", "dtype-mismatch"), ("/model/u", "only-in-a")):
    assert d[name]["status"] == status, (name, d[name])
    assert d[name]["differing"] is None and d[name]["max_abs_error"] is None, (name, d[name])
assert d["/model/v"]["status"] == "differ" and d["/model/v"]["differing"] == 1 and d["/model/v"]["max_abs_error"] == 1.0, d["/model/v"]
PYEOF
echo "ok: diff --json nulls what it did not compare"
