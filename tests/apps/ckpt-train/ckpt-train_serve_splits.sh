#!/bin/bash
# ckpt-train serve keeps decoded only the splits its trials read: an eval-only campaign never
# decodes the 60,000 training images; a resume campaign keeps both. The worker names each split it keeps in its log (OUT/work/.../worker.log),
# and its records equal the command-mode run's.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-train-serve-splits
FLIP=$1
TRAIN=$2
run "$TRAIN" train --model mlp --epochs 1 --seed 3 --limit 256 --test-limit 100 --ckpt-dir "$T/ck"
CK=$("$TRAIN" latest --ckpt-dir "$T/ck")
config() {  # config NAME MODE SUBCOMMAND-ARGS-JSON
  cat > "$T/$1.json" <<JSON
{"name": "$1", "checkpoint": "$CK", "mode": "$2", "command": ["$TRAIN", $3], "trials": 3, "seed": 5, "timeout_s": 120,
 "inject": {"flips": 1, "role": "model", "bits": "sign,exponent", "strata": "field"}, "metric": "test_accuracy", "tolerance": 0.01}
JSON
}
kept() { cat "$T/$1"/work/*/worker.log | grep -c "ckpt-train serve: kept the $2 split"; }
config eval worker '"eval", "--from", "{ckpt}", "--summary", "{out}"'
run "$FLIP" campaign "$T/eval.json" --out "$T/ev" --jobs 1 --keep-work -q
[ "$(kept ev test)" = 1 ] || { cat "$T"/ev/work/*/worker.log; fail "the eval worker keeps the test split once"; }
[ "$(kept ev training)" = 0 ] || { cat "$T"/ev/work/*/worker.log; fail "an eval-only worker decoded the training split"; }
config evalc command '"eval", "--from", "{ckpt}", "--summary", "{out}"'
run "$FLIP" campaign "$T/evalc.json" --out "$T/evc" --jobs 1 -q
config resume worker '"resume", "--from", "{ckpt}", "--epochs", "2", "--ckpt-dir", "{dir}", "--summary", "{out}"'
run "$FLIP" campaign "$T/resume.json" --out "$T/re" --jobs 1 --keep-work -q
[ "$(kept re test)" = 1 ] && [ "$(kept re training)" = 1 ] || { cat "$T"/re/work/*/worker.log; fail "a resume worker keeps both splits once"; }
# Same trials, same classes and metrics as the command-mode run.
recs() { cat "$T/$1"/results/*.jsonl | $PY -c "import sys, json; print(sorted((r['trial'], r['class'], r['metric']) for r in map(json.loads, sys.stdin)))"; }
[ "$(recs ev)" = "$(recs evc)" ] || fail "eval records differ between worker and command mode"
echo OK
