#!/bin/bash
# resil.trial's resident worker against the same trial module run as a command, on real processes:
# tests/python/toy_trial.py ends trial t in a class chosen by t mod 9 (hang, crash by signal,
# load_failure, a NaN metric, no metric, NaN raised, an exception, a straggler left in the
# group, a plain result), classified on two metrics. Checked: the worker with --jobs 1 and 2 gives
# the command mode's records trial by trial; no straggler survives its trial; kill -9 of the
# campaign leaves no worker, trial or straggler and the re-run completes to the same records; a
# worker killed with -9 mid-trial takes its trial's process group with it, is replaced, and the
# records are the same; SIGTERM stops a worker campaign with exit 75 and nothing left; worker mode
# needs a command with a subcommand where a worker can be started.
. "$(dirname "$0")/../support/test_lib.sh" python-trial-worker
FLIP=$1
TOY=$SRC/tests/python/toy_trial.py
export TOY_MARKER="toy-straggler-$$"
CAMPAIGN_PID=
on_exit() { [ -n "$CAMPAIGN_PID" ] && kill -9 "$CAMPAIGN_PID" 2> /dev/null; pkill -9 -f -- "$TOY_MARKER" 2> /dev/null; }
"$PY" -c "import numpy; numpy.save('$T/g.npy', numpy.linspace(0.5, 1.5, 256, dtype=numpy.float32))" || fail "numpy"
config() {  # config NAME MODE [TRIALS]
  printf '%s\n' '{"name": "toy", "checkpoint": "'"$T"'/g.npy", "mode": "'"$2"'", "trials": '"${3:-9}"', "seed": 3, "timeout_s": 8,' \
    ' "command": ["'"$PY"'", "'"$TOY"'", "eval", "--from", "{ckpt}", "--out", "{out}", "--trial", "{trial}"],' \
    ' "inject": {"flips": 1, "strata": "field"},' \
    ' "metrics": [{"name": "accuracy", "tolerance": 0.01}, {"name": "loss", "tolerance": 0.5, "higher_is_better": false}]}' > "$T/$1.json"
}
# same A B: the records of two campaign directories agree on everything a trial computes.
same() {
  "$PY" - "$1" "$2" <<'PYEOF' || fail "records of $1 and $2 differ"
import glob, json, sys
keys = ("class", "note", "metric", "delta", "metrics", "flips", "exit_code", "signal", "stratum", "strata", "injected_nonfinite",
        "restore", "trial_seed")
def recs(d):
    out = {}
    for f in glob.glob(d + "/results/*.jsonl"):
        for line in open(f):
            r = json.loads(line)
            out[r["trial"]] = {k: r.get(k) for k in keys}
            out[r["trial"]]["error"] = (r.get("summary") or {}).get("error")
    return out
a, b = recs(sys.argv[1]), recs(sys.argv[2])
assert a and sorted(a) == sorted(b), (sorted(a), sorted(b))
for t in a:
    assert a[t] == b[t], (t, a[t], b[t])
PYEOF
}
no_leftovers() {  # no worker, trial or straggler of this test runs any more
  gone "$TOY serve" || fail "$1: a trial worker or trial outlived the campaign: $(pgrep -a -f -- "$TOY serve")"
  gone "$TOY_MARKER" || fail "$1: a trial's straggler outlived its trial"
}

# 1. The reference: command mode, two jobs. Each class where the toy module puts it.
config cmd command
run "$FLIP" campaign "$T/cmd.json" --out "$T/ref" --jobs 2
no_leftovers "command mode"
"$PY" - "$T/ref" <<'PYEOF' || fail "classes of the command-mode campaign"
import glob, json, sys
r = {}
for f in glob.glob(sys.argv[1] + "/results/*.jsonl"):
    for line in open(f):
        x = json.loads(line)
        r[x["trial"]] = x
assert r[0]["class"] == "hang", r[0]
assert r[1]["class"] == "crash" and r[1]["signal"] == 11, r[1]
assert r[2]["class"] == "load_failure" and r[2]["exit_code"] == 4, r[2]
assert r[3]["class"] == "nan_later" and r[3]["note"] == "loss is NaN" and r[3]["exit_code"] == 0, r[3]
assert r[3]["metrics"]["loss"]["verdict"] == "nonfinite" and r[3]["metrics"]["accuracy"]["value"] is not None, r[3]
assert r[4]["class"] == "unreadable_summary" and r[4]["note"] == 'the summary has no "accuracy"', r[4]
assert r[5]["class"] == "nan_later" and r[5]["exit_code"] == 6 and r[5]["summary"]["nan_detected"] is True, r[5]
assert r[6]["class"] == "crash" and r[6]["exit_code"] == 1, r[6]
assert r[6]["summary"]["error"].startswith("ZeroDivisionError: a bug in the trial (toy_trial.py:"), r[6]
for t in (7, 8):
    assert r[t]["class"] in ("masked", "tolerable_sdc", "critical_sdc"), r[t]
    assert set(r[t]["metrics"]) == {"accuracy", "loss"}, r[t]
PYEOF

# 2. The worker, one job and two jobs: the same records.
config wrk worker
run "$FLIP" campaign "$T/wrk.json" --out "$T/w1" --jobs 1
grep -q "trial workers" "$T/stdout" || fail "the first line names worker mode"
no_leftovers "worker --jobs 1"
run "$FLIP" campaign "$T/wrk.json" --out "$T/w2" --jobs 2
no_leftovers "worker --jobs 2"
same "$T/ref" "$T/w1"
same "$T/ref" "$T/w2"

# 3. kill -9 of a worker-mode campaign (two jobs) once 3 trials are recorded: nothing of it runs on,
#    and the same command completes the campaign to the reference's records.
config slow worker
kill9_campaign "$T/k9" 3 "$FLIP" campaign "$T/slow.json" --out "$T/k9" --jobs 2
no_leftovers "kill -9 of the campaign"
run "$FLIP" campaign "$T/slow.json" --out "$T/k9" --jobs 2
grep -q "already done" "$T/stdout" || fail "the re-run did not skip the recorded trials"
same "$T/ref" "$T/k9"

# 4. kill -9 of the worker while it runs trial 0 (the hang): its trial's process group dies with it
#    (the group's supervisor gets PR_SET_PDEATHSIG), a fresh worker runs the trial again, and the
#    records are the reference's.
"$FLIP" campaign "$T/wrk.json" --out "$T/wd" --jobs 1 > "$T/wd.log" 2>&1 &
CAMPAIGN_PID=$!
W= TRIAL=
for _ in $(seq 600); do
  W=$(pgrep -P "$CAMPAIGN_PID" -f -- "$TOY serve")
  [ -n "$W" ] && TRIAL=$(pgrep -P "$W") && [ -n "$TRIAL" ] && break
  sleep 0.05
done
[ -n "$TRIAL" ] || { cat "$T/wd.log"; fail "never saw the worker's trial"; }
kill -9 "$W"
sleep 1
# Processes of the trial's group still running (a zombie waits for a reaper: it runs nothing).
running=$(ps -e -o pgid=,stat=,pid= | awk -v g="$TRIAL" '$1 == g && $2 !~ /^Z/ {print $3}')
[ -z "$running" ] || fail "processes of the trial's group $TRIAL outlived its worker: $(ps -o pid,stat,args -p $running)"
wait "$CAMPAIGN_PID" || { cat "$T/wd.log"; fail "the campaign failed after its worker was killed"; }
CAMPAIGN_PID=
no_leftovers "a killed worker"
same "$T/ref" "$T/wd"

# 5. SIGTERM (a scheduler) stops a worker-mode campaign: exit 75, one line, nothing left running.
"$FLIP" campaign "$T/wrk.json" --out "$T/st" --jobs 2 > "$T/st.out" 2> "$T/st.err" &
CAMPAIGN_PID=$!
for _ in $(seq 600); do
  [ "$(cat "$T"/st/results/*.jsonl 2> /dev/null | wc -l)" -ge 2 ] && break
  sleep 0.05
done
kill -TERM "$CAMPAIGN_PID"
wait "$CAMPAIGN_PID"; rc=$?
CAMPAIGN_PID=
[ "$rc" = 75 ] || { cat "$T/st.out" "$T/st.err"; fail "SIGTERM: exit $rc, expected 75"; }
[ "$(grep -c . "$T/st.err")" = 1 ] || fail "SIGTERM: not one line: $(cat "$T/st.err")"
no_leftovers "SIGTERM"
run "$FLIP" campaign "$T/wrk.json" --out "$T/st" --jobs 2
same "$T/ref" "$T/st"

# 6. Worker mode needs a program that can serve: a Python command whose subcommand is not right
#    after the script, or a script that is no resil.trial module, is exit 2 naming mode or serve.
"$PY" - "$T/wrk.json" "$T/bad-sub.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1])); c["command"].insert(1, "-u"); json.dump(c, open(sys.argv[2], "w"))
PYEOF
expect_err 2 "mode" "$FLIP" campaign "$T/bad-sub.json" --out "$T/bad"
printf 'import sys\nsys.exit(0)\n' > "$T/plain.py"
sed "s#$TOY#$T/plain.py#" "$T/wrk.json" > "$T/plain.json"
printf '{"accuracy": 1.0, "loss": 0.0}\n' > "$T/plain-golden.json"
"$PY" - "$T/plain.json" "$T/plain-golden.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1])); c["golden"] = {"summary": sys.argv[2]}; json.dump(c, open(sys.argv[1], "w"))
PYEOF
expect_err 2 "serve" "$FLIP" campaign "$T/plain.json" --out "$T/bad2"
echo "python trial worker: all checks passed"
