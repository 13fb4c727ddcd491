#!/usr/bin/env bash
# The PBS scripts without a PBS server: qrerun, qsub's environment and the job id are stand-ins,
# mpiexec and the binaries are real. Checks: a preempted run whose qrerun fails ends with 75 (not
# 0, as a success the scheduler would not rerun); an NP that is not a number is never evaluated
# (NP='a[$(cmd)]' ran cmd) and falls back to the node file's count; ec-train.pbs relaunches after
# a real rank death (through ec-train-run.sh) and ends completed with no segment left.
#   test_pbs.sh SOURCE_DIR BIN_DIR
. "$(dirname "$0")/../support/test_lib.sh" resil-test-pbs
src=$1 bin=$2
mkdir -p "$T/stub" "$T/work"
cat >"$T/stub/qrerun" <<'SH'
#!/bin/bash
echo "qrerun $*" >>"$STUB_LOG"
exit "${QRERUN_RC:-0}"
SH
chmod +x "$T/stub/qrerun"
export PATH=$T/stub:$PATH STUB_LOG=$T/calls.log RESIL_ROOT=$src RESIL_BIN=$bin
cd "$T/work" || exit 1
# 1. train.pbs preempted (SIGTERM to the ranks once the first checkpoint exists), qrerun failing:
#    exit 75 and the error line.
(PBS_JOBID=77.srv PBS_O_WORKDIR=$T/work NP=2 EPOCHS=50 CKPT_DIR=$T/work/ck QRERUN_RC=1 \
   TRAIN_ARGS="--limit 2000 --test-limit 100 --batch 32" bash "$src/scripts/pbs/train.pbs" >train.out 2>&1; echo $? >train.rc) &
for _ in $(seq 600); do ls ck/*.done >/dev/null 2>&1 && break; sleep 0.1; done
pkill -TERM -f "ckpt-train (train|resume) .*--ckpt-dir $T/work/ck" || fail "no ranks to preempt: $(cat train.out)"
wait
[ "$(cat train.rc)" = 75 ] || fail "train.pbs with a failing qrerun: exit $(cat train.rc), expected 75: $(tail -5 train.out)"
grep -q "qrerun 77.srv" "$STUB_LOG" || fail "qrerun was not called"
grep -q "resil: error: qrerun 77.srv failed: submit the job again to continue" train.out || fail "no error line: $(tail -5 train.out)"
# 2. NP is digits or ignored: an expression is never evaluated.
PBS_JOBID=78.srv PBS_O_WORKDIR=$T/work NP='a[$(touch '"$T"'/pwned)]' EPOCHS=1 CKPT_DIR=$T/work/ck2 LAUNCH=true \
  bash "$src/scripts/pbs/train.pbs" >np.out 2>&1
[ -e "$T/pwned" ] && fail "NP was evaluated as an expression"
# 3. ec-train.pbs: a rank killed at step 5 is relaunched; the report says completed; no segment left.
PBS_JOBID=79.srv PBS_O_WORKDIR=$T/work NP=2 K=1 M=1 STEPS=20 EC_ARGS="--rows 64 --tables 2 --kill 1@5" \
  bash "$src/scripts/pbs/ec-train.pbs" >ec.out 2>&1
rc=$?
[ "$rc" = 0 ] || fail "ec-train.pbs with a rank killed: exit $rc: $(tail -5 ec.out)"
grep -q "relaunch 1 of 10" ec.out || fail "no relaunch: $(tail -5 ec.out)"
$PY -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["completed"] else 1)' ec-report-79.srv.json || fail "report not completed"
ls /dev/shm | grep -q "resil-ec-79.srv-" && fail "segments left behind"
echo "ok: PBS scripts"
