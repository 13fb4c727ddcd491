#!/bin/bash
# The default inject.role fits the trial: a command whose subcommand is `eval` (ckpt-train eval, a
# resil.trial module) flips the model's tensors only and says so; a command of unknown kind keeps
# "all" and says what share of the fault space is optimizer state; a resume trial says nothing; a
# campaign directory that recorded trials under "all" continues under it when the configuration
# leaves the role to its default; an explicit role is never overridden.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-role-default
FLIP=$1
$PY - "$T/g.h5" <<'PYEOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["model/w"] = np.linspace(0.5, 1.5, 64, dtype=np.float32)
    f["optimizer/w/m"] = np.full(128, 0.125, np.float32)
PYEOF
printf 'import json, sys\njson.dump({"test_accuracy": 0.5}, open(sys.argv[-1], "w"))\n' > "$T/t.py"
config() {  # config NAME COMMAND-JSON [ROLE]
  local role=
  [ -n "${3:-}" ] && role=', "role": "'"$3"'"'
  printf '%s\n' '{"name": "role", "checkpoint": "'"$T"'/g.h5", "command": '"$2"', "trials": 4, "seed": 2, "timeout_s": 60,' \
    ' "inject": {"flips": 1'"$role"'}}' > "$T/$1.json"
}
roles() { cat "$1"/results/*.jsonl | $PY -c "import sys, json; print(' '.join(sorted({json.loads(l)['flips'][0]['dataset'].split('/')[1] for l in sys.stdin})))"; }
EVAL='["'"$PY"'", "'"$T"'/t.py", "eval", "--from", "{ckpt}", "--out", "{out}"]'

# 1. An evaluation trial: the model's tensors only, and one note saying so.
config eval "$EVAL"
run "$FLIP" campaign "$T/eval.json" --out "$T/eval" --jobs 1
grep -q '^note: inject.role model: the default for a trial that only evaluates' "$T/stdout" || { cat "$T/stdout"; fail "no note on the default role"; }
[ "$(roles "$T/eval")" = model ] || fail "an eval campaign flipped $(roles "$T/eval")"
grep -q '"role": "model"' "$T/eval/campaign.json" || fail "campaign.json does not record the role"
run "$FLIP" plan "$T/eval.json"
grep -q "2048 bits" "$T/stdout" || { cat "$T/stdout"; fail "plan does not count the model's 2048 bits only"; }

# 2. An explicit role stays as given (and no note).
config all "$EVAL" all
run "$FLIP" campaign "$T/all.json" --out "$T/all" --jobs 1 --max-trials 2
grep -q "^note: inject.role" "$T/stdout" && fail "a note on a role the configuration gave"
grep -q '"role": "all"' "$T/all/campaign.json" || fail "the explicit role all was not kept"
# 3. ... and a directory that recorded trials under "all" continues under it when the role is left
#    to its default (the default of an eval trial was "all" before): the same campaign.
cp "$T/eval.json" "$T/all-default.json"
run "$FLIP" campaign "$T/all-default.json" --out "$T/all" --jobs 1
grep -q "^note: inject.role all, as $T/all/campaign.json recorded it" "$T/stdout" || { cat "$T/stdout"; fail "no note on the kept role"; }
grep -q "4 trials, 2 already done, 2 run now" "$T/stdout" || { cat "$T/stdout"; fail "the campaign did not continue"; }

# 4. A command of unknown kind: "all", with a note on the optimizer state's share (128 of 192 words).
config other '"'"$PY"' '"$T"'/t.py {out}"'
run "$FLIP" campaign "$T/other.json" --out "$T/other" --jobs 1 --max-trials 1
grep -q '^note: inject.role all (the default): 67 % of the fault space is optimizer state' "$T/stdout" || { cat "$T/stdout"; fail "no note on the optimizer share"; }
# 5. A checkpoint without tensors in the model role (a .npy array): nothing is known to be optimizer
#    state, so an evaluation trial's default is "all", and the note says why.
$PY -c "import numpy, sys; numpy.save(sys.argv[1], numpy.ones(32, numpy.float32))" "$T/a.npy"
sed "s#$T/g.h5#$T/a.npy#" "$T/eval.json" > "$T/npy.json"
run "$FLIP" campaign "$T/npy.json" --out "$T/npy" --jobs 1 --max-trials 1
grep -q "^note: inject.role all: the default for a trial that only evaluates is model, but $T/a.npy has no tensor in the model role" "$T/stdout" \
  || { cat "$T/stdout"; fail "no note on the role of a .npy"; }
grep -q '"role": "all"' "$T/npy/campaign.json" || fail "the .npy campaign's role is not all"
run "$FLIP" plan "$T/npy.json"
grep -q "1024 bits" "$T/stdout" || { cat "$T/stdout"; fail "plan of the .npy campaign"; }
# 6. A resume trial reads the optimizer state: "all", no note.
config resume '["'"$PY"'", "'"$T"'/t.py", "resume", "--from", "{ckpt}", "--out", "{out}"]'
run "$FLIP" campaign "$T/resume.json" --out "$T/resume" --jobs 1 --max-trials 1
grep -q "^note: inject.role" "$T/stdout" && fail "a note on a resume trial's role"
grep -q '"role": "all"' "$T/resume/campaign.json" || fail "a resume campaign's default role is not all"
echo "role defaults: all checks passed"
