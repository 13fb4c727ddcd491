#!/bin/bash
# A worker whose setup() ran parallel torch operations (torch's OpenMP pool live when it forks
# each trial): the forked trials must neither hang at their first parallel region nor run on fewer
# threads, and a worker campaign gives the command mode's records trial by trial (the same metrics,
# bit for bit: a trial's numbers do not depend on the mode). tests/python/openmp_trial.py checks
# the thread count in the trial. Exit 77 only when /usr/bin/python3 cannot import torch.
. "$(dirname "$0")/../support/test_lib.sh" python-openmp-worker
FLIP=$1
TRIAL=$SRC/tests/python/openmp_trial.py
"$PY" -c "import torch" 2> /dev/null || { echo "SKIP: /usr/bin/python3 cannot import torch (python3-torch)"; exit 77; }
"$PY" -c "import numpy; numpy.save('$T/g.npy', numpy.linspace(0.5, 1.5, 256, dtype=numpy.float32))" || fail "numpy"
config() {  # config NAME MODE
  printf '%s\n' '{"name": "omp", "checkpoint": "'"$T"'/g.npy", "mode": "'"$2"'", "trials": 4, "seed": 3, "timeout_s": 60,' \
    ' "command": ["'"$PY"'", "'"$TRIAL"'", "eval", "--from", "{ckpt}", "--out", "{out}"],' \
    ' "inject": {"flips": 1, "strata": "field"},' \
    ' "metrics": [{"name": "accuracy", "tolerance": 0.01}, {"name": "loss", "tolerance": 0.5, "higher_is_better": false}]}' > "$T/$1.json"
}
config cmd command
config wrk worker
run "$FLIP" campaign "$T/cmd.json" --out "$T/c" --jobs 1
run "$FLIP" campaign "$T/wrk.json" --out "$T/w" --jobs 1
"$PY" - "$T/c" "$T/w" <<'PYEOF' || fail "worker and command records differ"
import glob, json, sys
keys = ("class", "note", "metric", "delta", "metrics", "flips", "exit_code", "signal")
def recs(d):
    return {r["trial"]: {k: r.get(k) for k in keys} for f in glob.glob(d + "/results/*.jsonl") for r in map(json.loads, open(f))}
c, w = recs(sys.argv[1]), recs(sys.argv[2])
assert sorted(c) == sorted(w) == [0, 1, 2, 3], (sorted(c), sorted(w))
for t in c:
    assert c[t]["class"] not in ("hang", "crash", "load_failure", "unreadable_summary"), (t, c[t])
    assert c[t] == w[t], (t, c[t], w[t])
print("worker = command:", " ".join(c[t]["class"] for t in sorted(c)))
PYEOF
echo "python openmp worker: all checks passed"
