#!/bin/bash
# ckpt-flip report on a campaign whose files were edited by hand: a record field of the wrong type
# is exit 4 naming the file and line, a golden.json that is no golden record is exit 4 naming it,
# a --plot-script that is not there is exit 3 naming the option, before anything is written; a record
# nested deeper than 64 levels is exit 4, not a stack overflow.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-report-hostile
FLIP=$1
$PY - "$T/g.h5" <<'PYEOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["model/w"] = np.ones(64, np.float32)
PYEOF
$PY - "$T/c.json" "$T/g.h5" <<'PYEOF'
import json, sys
json.dump({"name": "r", "checkpoint": sys.argv[2], "command": r'echo "{\"test_accuracy\": 0.5}" > {out}',
           "trials": 4, "seed": 3, "timeout_s": 60, "inject": {"strata": "bit"}}, open(sys.argv[1], "w"))
PYEOF
expect_rc 0 "$FLIP" campaign "$T/c.json" --out "$T/res" -q
expect_rc 0 "$FLIP" report "$T/res"
edit() {  # edit DIR PYTHON: run PYTHON on the first record (r) of DIR/results, written back
  rm -rf "$T/$1"; cp -r "$T/res" "$T/$1"
  $PY - "$T/$1" "$2" <<'PYEOF'
import glob, json, sys
f = sorted(glob.glob(sys.argv[1] + "/results/*.jsonl"))[0]
lines = open(f).read().splitlines()
r = json.loads(lines[0]); exec(sys.argv[2]); lines[0] = json.dumps(r)
open(f, "w").write("\n".join(lines) + "\n")
PYEOF
}
edit v1 'r["strata"]["bit"] = 5'
expect_err 4 'results/shard-0-of-1.jsonl:1: trial [0-9]*: "strata" "bit" 5 is not a string' "$FLIP" report "$T/v1"
edit v2 'r["wall_seconds"] = "x"'
expect_err 4 'results/shard-0-of-1.jsonl:1: trial [0-9]*: "wall_seconds" "x" is not a number' "$FLIP" report "$T/v2"
edit v4 'r["cpu_seconds"] = None'
expect_err 4 'results/shard-0-of-1.jsonl:1: trial [0-9]*: "cpu_seconds" null is not a number' "$FLIP" report "$T/v4"
edit v3 'r["strata"] = [1]'
expect_err 4 'jsonl:1: trial [0-9]*: "strata" is not an object' "$FLIP" report "$T/v3"
# A record nested 200,000 deep (a few hundred KB), twice: exit 4 naming the line, not a stack overflow
# in the comparison of the two copies (before: SIGSEGV).
rm -rf "$T/v5"; cp -r "$T/res" "$T/v5"
$PY - "$T/v5" <<'PYEOF'
import glob, json, sys
f = sorted(glob.glob(sys.argv[1] + "/results/*.jsonl"))[0]
lines = open(f).read().splitlines()
r = json.loads(lines[0]); r["flips"] = "DEEP"
deep = json.dumps(r).replace('"DEEP"', "[" * 200000 + "]" * 200000)
open(f, "w").write("\n".join([deep, deep] + lines[1:]) + "\n")
PYEOF
expect_err 4 'results/shard-0-of-1.jsonl:1: malformed record: nested deeper than 64 levels' "$FLIP" report "$T/v5"
rm -rf "$T/v4"; cp -r "$T/res" "$T/v4"; echo '{}' > "$T/v4/golden.json"
expect_err 4 'v4/golden.json: not a golden record' "$FLIP" report "$T/v4" --json "$T/v4.json"
[ -e "$T/v4.json" ] && fail "a refused report wrote --json"
expect_err 3 '--plot-script .*/nonexistent.py' "$FLIP" report "$T/res" --markdown "$T/r.md" --plot-script "$T/nonexistent.py"
[ -e "$T/r.md" ] && fail "a refused report wrote --markdown"
echo "ok: report names the malformed file and line, and a missing --plot-script"
