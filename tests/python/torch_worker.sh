#!/bin/bash
# examples/pytorch/trial.py (train.py's evaluation and resume as resil.trial functions) through the
# resident worker against the same module as a command, on a 200-image golden .pt: an eval campaign
# classified on test accuracy and test loss (its default role: the model's tensors only, an eval
# reads no optimizer state) and a resume campaign (final.pt: bit_masked detectable) give the
# command mode's records trial by trial with --jobs 1 and 2; kill -9 of the worker-mode campaign and of
# a torch worker mid-trial leave no process behind and complete to the same records. Exit 77 only when
# torch cannot be imported.
. "$(dirname "$0")/../support/test_lib.sh" python-torch-worker
FLIP=$1
CAMPAIGN_PID=
on_exit() { [ -n "$CAMPAIGN_PID" ] && kill -9 "$CAMPAIGN_PID" 2> /dev/null; }
"$PY" -c "import torch" 2> /dev/null || { echo "SKIP: /usr/bin/python3 cannot import torch (python3-torch)"; exit 77; }
cd "$SRC" || fail "cannot enter the source tree $SRC"
run "$PY" examples/pytorch/train.py train --epochs 1 --limit 200 --seed 19 --save "$T/golden.pt"
GOLDEN_SHA=$(sha "$T/golden.pt")
config() {  # config NAME MODE KIND TRIALS
  local extra='"inject": {"flips": 1, "strata": "field"}'
  [ "$3" = resume ] && extra='"inject": {"flips": 1, "role": "all", "strata": "field"}'
  printf '%s\n' '{"name": "torch-'"$3"'", "checkpoint": "'"$T"'/golden.pt", "mode": "'"$2"'", "trials": '"$4"', "seed": 19, "timeout_s": 300,' \
    ' "command": ["/usr/bin/python3", "examples/pytorch/trial.py", "'"$3"'", "--from", "{ckpt}", "--out", "{out}", "--dir", "{dir}"],' \
    ' '"$extra"', "metrics": [{"name": "test_accuracy", "tolerance": 0.01}, {"name": "test_loss", "tolerance": 0.05, "higher_is_better": false}]}' > "$T/$1.json"
}
same() {
  "$PY" - "$1" "$2" <<'PYEOF' || fail "records of $1 and $2 differ"
import glob, json, sys
keys = ("class", "note", "metric", "delta", "metrics", "flips", "exit_code", "signal", "stratum", "strata", "injected_nonfinite", "restore", "trial_seed")
def recs(d):
    return {r["trial"]: {k: r.get(k) for k in keys} for f in glob.glob(d + "/results/*.jsonl") for r in map(json.loads, open(f))}
a, b = recs(sys.argv[1]), recs(sys.argv[2])
assert a and sorted(a) == sorted(b), (sorted(a), sorted(b))
for t in a:
    assert a[t] == b[t], (t, a[t], b[t])
print(sys.argv[2], "=", sys.argv[1], ":", " ".join(a[t]["class"] for t in sorted(a)))
PYEOF
}
config eval-cmd command eval 6
config eval-wrk worker eval 6
run "$FLIP" campaign "$T/eval-cmd.json" --out "$T/e-ref" --jobs 2
grep -q "inject.role model" "$T/stdout" || { cat "$T/stdout"; fail "an eval campaign does not say it defaults to the model's tensors"; }
run "$FLIP" campaign "$T/eval-wrk.json" --out "$T/e-w1" --jobs 1
run "$FLIP" campaign "$T/eval-wrk.json" --out "$T/e-w2" --jobs 2
same "$T/e-ref" "$T/e-w1"
same "$T/e-ref" "$T/e-w2"
"$PY" - "$T/e-ref" <<'PYEOF' || fail "eval campaign records"
import glob, json, sys
c = json.load(open(sys.argv[1] + "/campaign.json"))["config"]
assert c["inject"]["role"] == "model", c["inject"]
for f in glob.glob(sys.argv[1] + "/results/*.jsonl"):
    for r in map(json.loads, open(f)):
        assert r["flips"][0]["dataset"].startswith("/model/"), r["flips"]
        assert r["class"] != "unreadable_summary" and r["class"] != "crash", r
PYEOF
gone "trial.py serve --preload $T/" || fail "a trial worker outlived its campaign"
# kill -9 of the worker-mode eval campaign (two torch workers) once 2 trials are recorded: no worker
# or trial runs on, and the same command completes it to the reference's records.
kill9_campaign "$T/e-k9" 2 "$FLIP" campaign "$T/eval-wrk.json" --out "$T/e-k9" --jobs 2
gone "trial.py serve --preload $T/" || fail "kill -9 of the campaign: a torch worker outlived it"
run "$FLIP" campaign "$T/eval-wrk.json" --out "$T/e-k9" --jobs 2
grep -q "already done" "$T/stdout" || fail "the re-run after kill -9 did not skip the recorded trials"
same "$T/e-ref" "$T/e-k9"
# kill -9 of a torch worker while it runs a trial: the trial's process group dies with it, a fresh
# worker runs the trial again, and the records are the reference's.
"$FLIP" campaign "$T/eval-wrk.json" --out "$T/e-wd" --jobs 1 > "$T/e-wd.log" 2>&1 &
CAMPAIGN_PID=$!
W= GROUP=
for _ in $(seq 2400); do
  [ "$(cat "$T"/e-wd/results/*.jsonl 2> /dev/null | wc -l)" -ge 1 ] || { sleep 0.02; continue; }  # past the golden run
  W=$(pgrep -P "$CAMPAIGN_PID" -f -- "trial.py serve")
  [ -n "$W" ] && GROUP=$(pgrep -P "$W") && [ -n "$GROUP" ] && break
  sleep 0.02
done
[ -n "$GROUP" ] || { cat "$T/e-wd.log"; fail "never saw a torch worker's trial"; }
kill -9 "$W"
sleep 1
running=$(ps -e -o pgid=,stat=,pid= | awk -v g="$GROUP" '$1 == g && $2 !~ /^Z/ {print $3}')
[ -z "$running" ] || fail "processes of the trial's group $GROUP outlived its torch worker: $(ps -o pid,stat,args -p $running)"
wait "$CAMPAIGN_PID" || { cat "$T/e-wd.log"; fail "the campaign failed after its torch worker was killed"; }
CAMPAIGN_PID=
gone "trial.py serve --preload $T/" || fail "a torch worker outlived its campaign after a worker was killed"
same "$T/e-ref" "$T/e-wd"
config res-cmd command resume 4
config res-wrk worker resume 4
run "$FLIP" campaign "$T/res-cmd.json" --out "$T/r-ref" --jobs 2
run "$FLIP" campaign "$T/res-wrk.json" --out "$T/r-w1" --jobs 1
run "$FLIP" campaign "$T/res-wrk.json" --out "$T/r-w2" --jobs 2
same "$T/r-ref" "$T/r-w1"
same "$T/r-ref" "$T/r-w2"
"$PY" -c "import json,sys; g=json.load(open(sys.argv[1])); assert isinstance(g['final_weights_xxh64'], str), g" "$T/r-ref/golden.json" \
  || fail "the golden resume's final.pt was not hashed"
[ "$(sha "$T/golden.pt")" = "$GOLDEN_SHA" ] || fail "a campaign modified the golden .pt"
echo "python torch worker: all checks passed"
