#!/usr/bin/env bash
# The PBS scripts without a PBS server: qrerun, qsub's environment and the job id are stand-ins,
# mpiexec and the binaries are real. Checks: a preempted run whose qrerun fails ends with 75 (not
# 0, as a success the scheduler would not rerun); an NP that is not a number is never evaluated
# (NP='a[$(cmd)]' ran cmd) and falls back to the node file's count; ec-train.pbs relaunches after
# a real rank death (through ec-train-run.sh) and ends completed with no segment left; a campaign
# shard that exits 75 is rerun (campaign.pbs) or requeued (campaign.sbatch, with a stand-in scontrol);
# local-cluster.sh stop kills only its own daemons and refuses a DIR others may write.
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
# 4. A campaign shard that stops with 75 (SIGTERM: its records kept) is rerun or requeued, and a
#    failed rerun is 75 again; a stand-in ckpt-flip stands for the campaign.
mkdir -p "$T/fakebin"
printf '#!/bin/bash\necho "ckpt-flip $*" >>"$STUB_LOG"\nexit 75\n' >"$T/fakebin/ckpt-flip"
printf '#!/bin/bash\necho "scontrol $*" >>"$STUB_LOG"\nexit "${SCONTROL_RC:-0}"\n' >"$T/stub/scontrol"
chmod +x "$T/fakebin/ckpt-flip" "$T/stub/scontrol"
PBS_JOBID='80[3].srv' PBS_ARRAY_INDEX=3 SHARDS=8 CONFIG=c.json OUT=o RESIL_BIN=$T/fakebin bash "$src/scripts/pbs/campaign.pbs" >c1.out 2>&1
rc=$?; [ "$rc" = 0 ] && grep -q "qrerun 80\[3\].srv" "$STUB_LOG" || fail "campaign.pbs after 75: exit $rc, $(cat "$STUB_LOG")"
QRERUN_RC=1 PBS_JOBID='81[0].srv' CONFIG=c.json OUT=o RESIL_BIN=$T/fakebin bash "$src/scripts/pbs/campaign.pbs" >c2.out 2>&1
rc=$?; [ "$rc" = 75 ] || fail "campaign.pbs with a failing qrerun: exit $rc, expected 75"
SLURM_JOB_ID=900 SLURM_ARRAY_JOB_ID=899 SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=4 SLURM_SUBMIT_DIR=$T/work CONFIG=c.json OUT=o \
  RESIL_BIN=$T/fakebin bash "$src/scripts/slurm/campaign.sbatch" >c3.out 2>&1
rc=$?; [ "$rc" = 0 ] && grep -q "scontrol requeue 899_2" "$STUB_LOG" || fail "campaign.sbatch after 75: exit $rc, $(cat "$STUB_LOG")"
grep -q "ckpt-flip campaign c.json --shard 2/4 --out o" "$STUB_LOG" || fail "campaign.sbatch's shard: $(cat "$STUB_LOG")"
# 5. local-cluster.sh stop kills only the daemons its PID files name (a stale or planted PID of
#    another process survives), and a DIR another user could write is refused (exit 3).
mkdir -m 700 "$T/lc"
sleep 60 &
victim=$!
echo "$victim" >"$T/lc/munged.pid"
"$src/scripts/slurm/local-cluster.sh" stop "$T/lc" || fail "local-cluster.sh stop"
kill -0 "$victim" 2>/dev/null || fail "local-cluster.sh stop killed a process that is not its daemon"
chmod 777 "$T/lc"
"$src/scripts/slurm/local-cluster.sh" stop "$T/lc" 2>lc.err
rc=$?; [ "$rc" = 3 ] && grep -q "is not this user's private directory" lc.err || fail "a DIR others may write: exit $rc, $(cat lc.err)"
kill "$victim"
echo "ok: PBS scripts; campaign shards requeued after 75; local-cluster.sh stop"
