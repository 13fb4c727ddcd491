#!/bin/bash
# ckpt-flip campaign / plan / report / fit as black boxes with a real ckpt-train: an eval campaign
# and a resume campaign on a tiny MLP, shards merged by `report` equal to the single run, plots,
# a two-level FIT, usage errors, and the golden checkpoint never modified.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-campaign
FLIP=$1
TRAIN=$2

for c in campaign plan report fit; do
  help=$("$FLIP" $c --help) || fail "$c --help exited $?"
  grep -q "Examples:" <<< "$help" || fail "$c --help has no examples"  # not a pipe: grep -q leaving early would SIGPIPE the writer
done

# A tiny MLP: 512 training samples, one epoch; the test split limited to 200 samples.
run "$TRAIN" train --model mlp --epochs 1 --seed 3 --limit 512 --test-limit 200 --ckpt-dir "$T/ck"
CK=$("$TRAIN" latest --ckpt-dir "$T/ck")
SHA=$(sha256sum "$CK" | cut -d' ' -f1)

# plan: the Leveugle sample size of the selection (N = 235146 model weights x 32 bits).
run "$FLIP" plan "$CK" --role model --margin 0.05 --json
$PY - "$T/stdout" <<'PYEOF' || fail "plan --json"
import json, sys
j = json.load(open(sys.argv[1]))
N = j["population"]
n = N / (1 + 0.05**2 * (N - 1) / (1.959963984540054**2 * 0.25))
assert j["trials"] == int(-(-n // 1)), (j["trials"], n)
assert j["selected_bits"] == 32 * (784*256 + 256 + 256*128 + 128 + 128*10 + 10), j["selected_bits"]
PYEOF

cat > "$T/eval.json" <<EOF2
{"name": "eval-mlp", "checkpoint": "$CK",
 "command": ["$TRAIN", "eval", "--from", "{ckpt}", "--summary", "{out}"],
 "trials": 8, "seed": 5, "timeout_s": 60,
 "inject": {"flips": 1, "role": "model", "bits": "sign,exponent", "strata": "field"},
 "metric": "test_accuracy", "tolerance": 0.01}
EOF2
run "$FLIP" campaign "$T/eval.json" --out "$T/single"
grep -q "8 trials" "$T/stdout" || fail "campaign summary line"
# Progress without a terminal (a batch job's log): plain lines, none before the first interval (30 s unless
# RESIL_PROGRESS_SECONDS), never a terminal redraw; RESIL_PROGRESS=0 prints none.
grep -q "^trials " "$T/stderr" && fail "a campaign shorter than 30 s printed progress into a log"
RESIL_PROGRESS_SECONDS=0.1 run "$FLIP" campaign "$T/eval.json" --out "$T/progress" --quiet
grep -Eq '^trials [1-7]/8 \([0-9]+%\) [0-9.]+ s elapsed, ETA [0-9.]+ s: [a-z_]+=[0-9]+' "$T/stderr" || { cat "$T/stderr"; fail "no progress line in a log"; }
grep -q $'\r' "$T/stderr" && fail "a terminal redraw in a log"
RESIL_PROGRESS=0 RESIL_PROGRESS_SECONDS=0.1 run "$FLIP" campaign "$T/eval.json" --out "$T/progress0" --quiet
grep -q "^trials " "$T/stderr" && fail "RESIL_PROGRESS=0 printed progress"
# A resumed campaign's ETA is taken from the trials run now: with 6 of 8 resumed, the 7th trial's line
# gives an ETA near the elapsed time (one trial left at one trial's pace), not a seventh of it.
run "$FLIP" campaign "$T/eval.json" --out "$T/progress-resumed" --quiet --max-trials 6
RESIL_PROGRESS=1 run "$FLIP" campaign "$T/eval.json" --out "$T/progress-resumed" --quiet
tr '\r' '\n' < "$T/stderr" | awk '/^trials 7\/8 / { el = $4 + 0; eta = $7 + 0; found = 1
  if (el <= 0 || eta < 0.5 * el) { print "elapsed " el " s, ETA " eta " s"; exit 1 } }
  END { if (!found) { print "no 7/8 line"; exit 1 } }' || { cat -v "$T/stderr"; fail "a resumed campaign's ETA counted the resumed trials"; }
# A value that is not seconds in range is one warning line naming it, and the default applies.
RESIL_PROGRESS_SECONDS=abc run "$FLIP" campaign "$T/eval.json" --out "$T/progress-bad" --quiet
[ "$(cat "$T/stderr")" = "ckpt-flip: warning: RESIL_PROGRESS_SECONDS='abc' ignored: expected seconds in 0.1..86400 (30 is used)" ] \
  || { cat "$T/stderr"; fail "RESIL_PROGRESS_SECONDS=abc: not one warning line"; }
# Two shards, the second interrupted after 2 trials and continued.
run "$FLIP" campaign "$T/eval.json" --out "$T/sharded" --shard 0/2
run "$FLIP" campaign "$T/eval.json" --out "$T/sharded" --shard 1/2 --max-trials 2
run "$FLIP" campaign "$T/eval.json" --out "$T/sharded" --shard 1/2
grep -q "2 already done, 2 run now" "$T/stdout" || { cat "$T/stdout"; fail "resume skipped finished trials"; }
[ "$(sha256sum "$CK" | cut -d' ' -f1)" = "$SHA" ] || fail "the golden checkpoint changed"

run "$FLIP" report "$T/single" --json "$T/single/report.json" --markdown "$T/single/report.md" --records "$T/single.jsonl"
grep -q "Clopper-Pearson" "$T/stdout" || fail "report tables"
run "$FLIP" report "$T/sharded" --json "$T/sharded/report.json" --records "$T/sharded.jsonl" --no-plots
$PY - "$T" <<'PYEOF' || fail "shard merge differs from the single run"
import json, sys
t = sys.argv[1]
def recs(p):
    out = []
    for line in open(p):
        r = json.loads(line)
        for k in ("wall_seconds", "cpu_seconds", "shard", "output_tail"):
            r.pop(k, None)
        out.append(r)
    return out
raw = [json.loads(line) for line in open(t + "/single.jsonl")]
a, b = recs(t + "/single.jsonl"), recs(t + "/sharded.jsonl")
assert len(a) == 8 and a == b
ra, rb = json.load(open(t + "/single/report.json")), json.load(open(t + "/sharded/report.json"))
# Each command trial's CPU time (its process tree's), summed in the report's timing.
assert all(r["cpu_seconds"] > 0 for r in raw), [r.get("cpu_seconds") for r in raw]
tm = ra["timing"]
assert tm["trials_cpu_timed"] == 8 and abs(tm["trial_cpu_seconds_total"] - sum(r["cpu_seconds"] for r in raw)) < 1e-9, tm
ra.pop("timing"); rb.pop("timing")
assert ra == rb
assert ra["trials"]["done"] == 8
assert sum(v["x"] for v in ra["overall"]["classes"].values()) == 8
for r in a:
    assert r["restore"] == "reverted" and r["strata"]["field"] in ("sign", "exponent"), r
    assert r["stratum"] == ("sign", "exponent")[r["trial"] % 2]
PYEOF
[ -s "$T/single/plot-classes.png" ] || fail "no class plot"
grep -q "plot-classes.png" "$T/single/report.md" || fail "markdown does not embed the plot"

# A resume campaign: one more epoch from each altered checkpoint; the golden run's final weights
# make bit-masked detectable.
cat > "$T/resume.json" <<EOF2
{"name": "resume-mlp", "checkpoint": "$CK",
 "command": ["$TRAIN", "resume", "--from", "{ckpt}", "--epochs", "2", "--ckpt-dir", "{dir}", "--summary", "{out}"],
 "trials": 3, "seed": 8, "timeout_s": 120, "inject": {"flips": 1, "bits": "0-3"}}
EOF2
run "$FLIP" campaign "$T/resume.json" --out "$T/resume"
$PY - "$T/resume" <<'PYEOF' || fail "resume campaign"
import json, sys, glob
g = json.load(open(sys.argv[1] + "/golden.json"))
assert g["final_weights_xxh64"], g
recs = [json.loads(l) for f in glob.glob(sys.argv[1] + "/results/*.jsonl") for l in open(f)]
assert len(recs) == 3
for r in recs:
    # Low mantissa bits of one weight: the run finishes; the class is decided by the metric.
    assert r["class"] in ("masked", "bit_masked", "tolerable_sdc", "critical_sdc"), r
    assert r["summary"]["steps"] == 16, r
PYEOF

# Two-level FIT with the example fault model and the eval campaign as the single-bit evidence.
run "$FLIP" fit --fault-model "$SRC/examples/fault-models/dram-illustrative.json" --results "$T/single" --json "$T/fit.json"
grep -q "two-level" "$T/stdout" && grep -q "injection only" "$T/stdout" || fail "fit output"
$PY -c "import json,sys; j=json.load(open('$T/fit.json')); assert j['fault_model']['illustrative'] and j['raw_fit'] > 0" || fail "fit json"

# Errors: bad configuration 2, missing checkpoint 3, different config in the same OUT 2.
echo '{"checkpoint": "x.h5"}' > "$T/bad.json"
expect_rc 2 "$FLIP" campaign "$T/bad.json" --out "$T/bad"
echo '{"checkpoint": "'"$T"'/missing.h5", "command": "true"}' > "$T/missing.json"
expect_rc 3 "$FLIP" campaign "$T/missing.json" --out "$T/missing"
sed 's/"seed": 5/"seed": 6/' "$T/eval.json" > "$T/eval6.json"
expect_rc 2 "$FLIP" campaign "$T/eval6.json" --out "$T/single"
expect_rc 2 "$FLIP" campaign "$T/eval.json" --out "$T/single" --shard 2/2
expect_rc 3 "$FLIP" report "$T/ck"
echo "ckpt-flip campaign CLI: all checks passed"
