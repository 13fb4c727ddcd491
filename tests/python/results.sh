#!/bin/bash
# resil.results reads what ckpt-flip writes: a flip log of `inject` (each flip's words and values
# against the altered file itself, read with h5py), a cut log, a campaign directory (records of two
# shards, a torn last line) and `report --json`, whose counts and rates the readers' must equal; and
# it refuses malformed input with an error naming the file and line.
. "$(dirname "$0")/../support/test_lib.sh" python-results
FLIP=$1
export PYTHONPATH=$SRC/python
"$PY" - "$T/g.h5" <<'PYEOF' || fail "fixture"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["model/w"] = np.linspace(0.5, 1.5, 512, dtype=np.float32).reshape(16, 32)
    f["optimizer/w/m"] = np.full(64, 0.125, np.float32)
    f["model/step"] = np.arange(8, dtype=np.int64)
PYEOF
run "$FLIP" inject "$T/g.h5" -o "$T/x.h5" --seed 5 --flips 20 --log "$T/flips.jsonl" --include '/model/*'
# A log cut by a kill: its last line ends without a newline.
head -c -40 "$T/flips.jsonl" > "$T/cut.jsonl"
# A campaign in two shards: the class depends on the flipped value (sh + Python's json).
cat > "$T/trial.py" <<'PYEOF'
import json, sys, h5py, numpy as np
with h5py.File(sys.argv[1]) as f:
    w = np.asarray(f["model/w"])
acc = 0.5 if np.all(np.isfinite(w)) and abs(float(w.mean()) - 1.0) < 1e-3 else 0.1
json.dump({"test_accuracy": acc if np.all(np.isfinite(w)) else float("nan")}, open(sys.argv[2], "w"))
PYEOF
printf '%s\n' '{"name": "py-results", "checkpoint": "'"$T"'/g.h5", "command": ["'"$PY"'", "'"$T"'/trial.py", "{ckpt}", "{out}"],' \
  ' "trials": 12, "seed": 8, "timeout_s": 60, "inject": {"flips": 1, "role": "model", "bits": "exponent,mantissa", "strata": "field"}}' > "$T/c.json"
run "$FLIP" campaign "$T/c.json" --out "$T/out" --shard 0/2 --jobs 1
run "$FLIP" campaign "$T/c.json" --out "$T/out" --shard 1/2 --jobs 1
run "$FLIP" report "$T/out" --json "$T/report.json" --no-plots
cp -r "$T/out" "$T/torn"
printf '{"trial": 3, "cla' >> "$T/torn/results/shard-1-of-2.jsonl"
cp -r "$T/out" "$T/bad"
sed -i '2s/.*/{"trial": 99,/' "$T/bad/results/shard-0-of-2.jsonl"

"$PY" - "$T" <<'PYEOF' || fail "resil.results"
import h5py, math, numpy as np, sys
from resil import results
t = sys.argv[1]

log = results.read_flip_log(t + "/flips.jsonl")
assert log.complete and log.header["seed"] == 5 and len(log.flips) == 20, log.header
# Several flips of one word chain (the old of one is the new of the one before): the golden file
# holds the first one's old word, the altered file the last one's new word.
words = {}
for fl in log.flips:
    assert fl.mask == fl.old ^ fl.new and [b for b in range(64) if fl.mask >> b & 1] == fl.bits, fl
    words.setdefault((fl.dataset, tuple(fl.nd)), []).append(fl)
with h5py.File(t + "/x.h5") as f, h5py.File(t + "/g.h5") as g:
    for (dataset, idx), chain in words.items():
        d = dataset.lstrip("/")
        old, new = np.asarray(g[d])[idx], np.asarray(f[d])[idx]
        as_int = lambda v: int(v.view(np.uint32 if v.dtype == np.float32 else np.uint64))
        assert as_int(old) == chain[0].old and as_int(new) == chain[-1].new, chain
        assert all(a.new == b.old for a, b in zip(chain, chain[1:])), chain
        if chain[-1].dtype == "f32":
            v = float(new)
            assert (math.isnan(v) and math.isnan(chain[-1].new_value)) or v == chain[-1].new_value, (chain, v)
cut = results.read_flip_log(t + "/cut.jsonl")
assert not cut.complete and len(cut.flips) <= 20, cut

c = results.read_campaign(t + "/out")
rep = results.read_report(t + "/report.json")
assert [r["trial"] for r in c.records] == list(range(12)), [r["trial"] for r in c.records]
assert c.metrics == [{"name": "test_accuracy", "higher_is_better": True, "tolerance": 0.01}], c.metrics
assert c.golden["metric"] == 0.5 and c.space["total_bits"] == rep["space"]["total_bits"]
counts = results.counts(c.records)
for cls, r in rep["overall"]["classes"].items():
    assert counts.get(cls, 0) == r["x"], (cls, counts, r)
groups = results.counts(c.records, by="group")
for g, (p, lo, hi) in results.rates(rep).items():
    assert groups.get(g, 0) == rep["overall"]["groups"][g]["x"] and lo <= p <= hi, (g, groups, p, lo, hi)
rows = results.trials_table(c.records)
assert all(isinstance(r["bit"], int) and r["group"] == results.group_of(r["class"]) and r["role"] == "model" for r in rows), rows[0]
assert results.counts(c.records, by="field") == {k: v["n"] for k, v in rep["by"]["field"].items() if v["n"]}, rep["by"]["field"]
fl = results.flips_of(c.records[0])[0]
assert fl.mask == fl.old ^ fl.new and fl.dataset == "/model/w", fl

torn = results.read_records(t + "/torn")  # the torn last line is skipped
assert [r["trial"] for r in torn] == list(range(12))
try:
    results.read_records(t + "/bad")
    raise SystemExit("a malformed record was read")
except results.FormatError as e:
    assert "shard-0-of-2.jsonl:2" in str(e), e
try:
    results.read_report(t + "/flips.jsonl")
    raise SystemExit("a flip log was read as a report")
except results.FormatError as e:
    assert "flips.jsonl" in str(e), e
print("resil.results:", len(log.flips), "flips,", len(c.records), "records,", counts)
PYEOF
echo "python results: all checks passed"
