#!/bin/bash
# --jobs N and "mode": "worker" against the serial command-mode run of the same campaign.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-jobs
FLIP=$1
TRAIN=$2
CAMPAIGN_PID=
on_exit() { [ -n "$CAMPAIGN_PID" ] && kill -9 "$CAMPAIGN_PID" 2> /dev/null; }
# same OUT_A OUT_B: the records agree trial by trial on everything a trial computes.
same() {
  $PY - "$1" "$2" <<'PYEOF' || fail "records of $1 and $2 differ"
import glob, json, sys
def recs(d):
    out = {}
    for f in glob.glob(d + "/results/*.jsonl"):
        for line in open(f):
            r = json.loads(line)
            out[r["trial"]] = {k: r.get(k) for k in ("class", "metric", "delta", "flips", "exit_code", "signal", "stratum", "strata",
                                                     "injected_nonfinite", "restore", "trial_seed")}
    return out
a, b = recs(sys.argv[1]), recs(sys.argv[2])
assert a and sorted(a) == sorted(b), (sorted(a), sorted(b))
for t in a:
    assert a[t] == b[t], (t, a[t], b[t])
PYEOF
}
classes() { cat "$1"/results/*.jsonl | $PY -c "import sys, json; print(' '.join(sorted({json.loads(l)['class'] for l in sys.stdin})))"; }

run "$TRAIN" train --model mlp --epochs 1 --seed 3 --limit 512 --test-limit 200 --ckpt-dir "$T/ck"
CK=$("$TRAIN" latest --ckpt-dir "$T/ck")
SHA=$(sha256sum "$CK" | cut -d' ' -f1)
config() {  # config NAME MODE TRIALS COMMAND-JSON [TIMEOUT] [BITS]
  cat > "$T/$1.json" <<EOF
{"name": "$1", "checkpoint": "$CK", "mode": "$2", "command": $4, "trials": $3, "seed": 5, "timeout_s": ${5:-60},
 "inject": {"flips": 1, "role": "model", "bits": "${6:-sign,exponent}", "strata": "field"}, "metric": "test_accuracy", "tolerance": 0.01}
EOF
}
EVAL='["'"$TRAIN"'", "eval", "--from", "{ckpt}", "--summary", "{out}"]'
RESUME='["'"$TRAIN"'", "resume", "--from", "{ckpt}", "--epochs", "2", "--ckpt-dir", "{dir}", "--summary", "{out}"]'

# 1. eval: command --jobs 1 is the reference; command --jobs 3, worker --jobs 1, worker --jobs 3,
#    and worker --jobs 2 inside two shards all give its records.
config eval command 16 "$EVAL"
mv "$T/eval.json" "$T/eval-command.json"
sed 's/"mode": "command"/"mode": "worker"/' "$T/eval-command.json" > "$T/eval-worker.json"
run "$FLIP" campaign "$T/eval-command.json" --out "$T/e-ref" --jobs 1
grep -q "1 job" "$T/stdout" || fail "the first line names the job count"
run "$FLIP" campaign "$T/eval-command.json" --out "$T/e-c3" --jobs 3
grep -q "3 jobs" "$T/stdout" || fail "the first line names the job count"
# Without --jobs: the CPUs the process may run on (a batch system's cpuset), not the node's.
if command -v taskset >/dev/null; then
  run taskset -c 0 "$FLIP" campaign "$T/eval-command.json" --out "$T/e-aff" --max-trials 1
  grep -q "timeout 60 s, 1 job -> " "$T/stdout" || fail "default --jobs under taskset -c 0: $(head -1 "$T/stdout")"
fi
run "$FLIP" campaign "$T/eval-worker.json" --out "$T/e-w1" --jobs 1
grep -q "trial workers" "$T/stdout" || fail "the first line names worker mode"
run "$FLIP" campaign "$T/eval-worker.json" --out "$T/e-w3" --jobs 3
run "$FLIP" campaign "$T/eval-worker.json" --out "$T/e-ws" --jobs 2 --shard 0/2
run "$FLIP" campaign "$T/eval-worker.json" --out "$T/e-ws" --jobs 2 --shard 1/2
for d in e-c3 e-w1 e-w3 e-ws; do same "$T/e-ref" "$T/$d"; done
[ "$(classes "$T/e-ref")" != masked ] || fail "the eval campaign should see more than one class"
# A campaign may continue in the other mode (mode is not part of what a trial computes).
run "$FLIP" campaign "$T/eval-command.json" --out "$T/e-mix" --jobs 2 --max-trials 5
run "$FLIP" campaign "$T/eval-worker.json" --out "$T/e-mix" --jobs 2
grep -q "5 already done, 11 run now" "$T/stdout" || { cat "$T/stdout"; fail "mode switch on resume"; }
same "$T/e-ref" "$T/e-mix"

# 2. resume with exponent flips (NaN/Inf during training included) and a hang: the same classes,
#    trial by trial, serial command mode against two workers.
config resume-command command 6 "$RESUME" 60 exponent
config resume-worker worker 6 "$RESUME" 60 exponent
run "$FLIP" campaign "$T/resume-command.json" --out "$T/r-ref" --jobs 1
run "$FLIP" campaign "$T/resume-worker.json" --out "$T/r-w2" --jobs 2
same "$T/r-ref" "$T/r-w2"
HANG='["'"$TRAIN"'", "resume", "--from", "{ckpt}", "--epochs", "100000", "--ckpt-dir", "{dir}", "--summary", "{out}"]'
config hang worker 2 "$HANG" 1.5 "0"
cat > "$T/hang-golden.json" <<EOF
{"test_accuracy": 0.5}
EOF
$PY - "$T/hang.json" "$T/hang-golden.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1])); c["golden"] = {"summary": sys.argv[2]}; json.dump(c, open(sys.argv[1], "w"))
PYEOF
run "$FLIP" campaign "$T/hang.json" --out "$T/hang" --jobs 2
[ "$(classes "$T/hang")" = hang ] || fail "a trial past its timeout in a worker is a hang: $(classes "$T/hang")"
gone "--ckpt-dir $T/hang/" || fail "a hung trial survived: $(pgrep -a -f -- "--ckpt-dir $T/hang/")"

# 3. kill -9 of a worker-mode campaign with --jobs 2 mid-run: no job, worker or trial survives it,
#    and the re-run completes to the reference's records.
config slow worker 16 '["'"$TRAIN"'", "eval", "--from", "{ckpt}", "--summary", "{out}"]'
kill9_campaign "$T/k9" 3 "$FLIP" campaign "$T/slow.json" --out "$T/k9" --jobs 2
gone "serve --preload $CK" || fail "a trial worker outlived the campaign"
run "$FLIP" campaign "$T/slow.json" --out "$T/k9" --jobs 2
grep -q "already done" "$T/stdout" || fail "the re-run did not skip the recorded trials"
same "$T/e-ref" "$T/k9"

# 3b. SIGTERM (a scheduler) to a worker-mode campaign with --jobs 2, SIGINT (^C) to a serial
#     command-mode one: exit 75, one line saying how far it got, no process or work copy left
#     behind, and the same command completes to the reference's records.
stop_campaign() {  # stop_campaign SIGNAL DIR CONFIG JOBS
  local sig=$1 dir=$2 cfg=$3 jobs=$4 rc
  # Background jobs of a script start with SIGINT ignored, which the campaign keeps: undone here.
  $PY -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
    "$FLIP" campaign "$cfg" --out "$dir" --jobs "$jobs" > "$dir.out" 2> "$dir.err" &
  CAMPAIGN_PID=$!
  for _ in $(seq 2400); do
    [ "$(cat "$dir"/results/*.jsonl 2> /dev/null | wc -l)" -ge 2 ] && break
    sleep 0.05
  done
  kill -"$sig" "$CAMPAIGN_PID"
  wait "$CAMPAIGN_PID"; rc=$?
  CAMPAIGN_PID=
  [ "$rc" = 75 ] || { cat "$dir.out" "$dir.err"; fail "SIG$sig: exit $rc, expected 75"; }
  [ "$(grep -c . "$dir.err")" = 1 ] && grep -q "^ckpt-flip: campaign [a-z-]* stopped by SIG$sig: [0-9]* trial(s) recorded by this run, [0-9]* of 16 in .*; run the same command again to continue\$" "$dir.err" \
    || fail "SIG$sig: not one line saying how far it got: $(cat "$dir.err")"
  gone "$dir/" && gone "serve --preload $CK" || fail "SIG$sig: processes outlived the campaign: $(pgrep -a -f -- "$dir/")"
  [ ! -e "$dir/work" ] || fail "SIG$sig: the work copies were left in $dir/work"
  run "$FLIP" campaign "$cfg" --out "$dir" --jobs "$jobs"
  grep -q "already done" "$T/stdout" || fail "SIG$sig: the re-run did not skip the recorded trials"
  same "$T/e-ref" "$dir"
}
stop_campaign TERM "$T/st" "$T/slow.json" 2
stop_campaign INT "$T/si" "$T/eval-command.json" 1

# 3c. A scheduler's SIGTERM to the whole job: the trial's command dies of the same signal, often before
#     the campaign looks at its stop flag. The trial is dropped (exit 75), never recorded as a crash.
#     The golden run (the first command) leaves a mark; the first trial finds it and signals.
config term-all command 4 '["if [ -e '"$T"'/ta.mark ]; then kill -TERM $(ps -o ppid= -p $PPID); kill -TERM $$; fi; touch '"$T"'/ta.mark; exec '"$TRAIN"' eval --from {ckpt} --summary {out}"]'
rc=0
"$FLIP" campaign "$T/term-all.json" --out "$T/ta" --jobs 1 > "$T/ta.out" 2> "$T/ta.err" || rc=$?
[ "$rc" = 75 ] || { cat "$T/ta.out" "$T/ta.err"; fail "SIGTERM to the campaign and its trial: exit $rc, expected 75"; }
[ -z "$(cat "$T"/ta/results/*.jsonl 2> /dev/null)" ] || fail "the trial stopped by the job's SIGTERM was recorded: $(cat "$T"/ta/results/*.jsonl)"

# 4. A worker killed while the campaign runs is restarted and its trial retried: same records.
"$FLIP" campaign "$T/eval-worker.json" --out "$T/wd" --jobs 1 > "$T/wd.log" 2>&1 &
CAMPAIGN_PID=$!
killed=
for _ in $(seq 400); do
  W=$(pgrep -P "$CAMPAIGN_PID" -f "serve --preload")
  if [ -n "$W" ] && [ "$(cat "$T"/wd/results/*.jsonl 2> /dev/null | wc -l)" -ge 2 ]; then kill -9 $W; killed=1; break; fi
  sleep 0.02
done
[ -n "$killed" ] || fail "never saw the worker"
wait "$CAMPAIGN_PID" || { cat "$T/wd.log"; fail "the campaign failed after its worker was killed"; }
CAMPAIGN_PID=
same "$T/e-ref" "$T/wd"

# 5. A worker that dies on every request: each trial is retried once on a fresh worker, then
#    recorded as crash; a program that cannot serve at all is a usage error naming serve.
cat > "$T/fake-train" <<'PYEOF'
#!/usr/bin/python3
import json, os, struct, sys
if sys.argv[1] == "serve":
    if os.environ.get("FAKE_NO_SERVE"): sys.exit(2)
    os.write(0, struct.pack("<I", 5) + b"ready")
    os.read(0, 4)   # the first bytes of a request, then die without an answer
    os.kill(os.getpid(), 9)
json.dump({"test_accuracy": 0.5}, open(sys.argv[sys.argv.index("--summary") + 1], "w"))
PYEOF
chmod +x "$T/fake-train"
config fake worker 3 '["'"$T/fake-train"'", "eval", "--from", "{ckpt}", "--summary", "{out}"]'
run "$FLIP" campaign "$T/fake.json" --out "$T/fake" --jobs 2
[ "$(classes "$T/fake")" = crash ] || fail "a trial whose worker dies twice is a crash: $(classes "$T/fake")"
grep -q "worker died twice" "$T"/fake/results/*.jsonl || fail "the crash note names the dead worker"
FAKE_NO_SERVE=1 expect_err 2 "serve" "$FLIP" campaign "$T/fake.json" --out "$T/fake-ns" --jobs 1

# 6. Usage errors: mode and --jobs checked like every other field and option (exit 2, named).
for v in '"bogus"' 3 null '["worker"]'; do
  sed "s/\"mode\": \"worker\"/\"mode\": $v/" "$T/eval-worker.json" > "$T/bad.json"
  expect_err 2 "mode" "$FLIP" campaign "$T/bad.json" --out "$T/bad"
done
config strcmd worker 2 '"'"$TRAIN"' eval --from {ckpt} --summary {out}"'
expect_err 2 "mode" "$FLIP" campaign "$T/strcmd.json" --out "$T/bad"
config traincmd worker 2 '["'"$TRAIN"'", "train", "--ckpt-dir", "{dir}"]'
expect_err 2 "mode" "$FLIP" campaign "$T/traincmd.json" --out "$T/bad"
for v in 0 -1 abc 1025 1.5; do expect_err 2 "jobs" "$FLIP" campaign "$T/eval-worker.json" --out "$T/bad" --jobs "$v"; done
[ ! -e "$T/bad" ] || fail "a refused campaign left OUT behind"
[ "$(sha256sum "$CK" | cut -d' ' -f1)" = "$SHA" ] || fail "the golden checkpoint changed"
echo "ckpt-flip campaign --jobs / mode worker: all checks passed"
