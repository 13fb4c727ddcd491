#!/usr/bin/env bash
# The scheduler scripts run by hand, outside Slurm/PBS: train.sbatch and train.pbs keep a
# preemption's exit 75 (not exit 1 on an unbound SLURM_JOB_ID / PBS_JOBID), and ec-train.sbatch
# says at once that it needs Slurm (exit 2, before any srun). run-train.sh is replaced by a stand-in that reports a preemption; then run-train.sh
# itself with a stand-in ckpt-train; submit-campaign.sh's arguments with a stand-in sbatch.
. "$(dirname "$0")/../../support/test_lib.sh" hpc-scripts-outside
src=$SRC
dir=$T
mkdir -p "$dir/root/scripts/hpc"; cd "$dir" || exit 1
printf '#!/bin/sh\necho "stand-in: preempted"\nexit 75\n' >root/scripts/hpc/run-train.sh
chmod +x root/scripts/hpc/run-train.sh
for s in slurm/train.sbatch pbs/train.pbs; do
  env -u SLURM_JOB_ID -u PBS_JOBID RESIL_ROOT="$dir/root" bash "$src/scripts/$s" >out 2>err
  rc=$?
  [ $rc = 75 ] || fail "$s outside its scheduler, preempted: exit $rc, expected 75: $(cat out err)"
  grep -q "run the script again to continue" out || fail "$s: $(cat out)"
  [ -s err ] && fail "$s printed errors: $(cat err)"
done
env -u SLURM_JOB_ID bash "$src/scripts/slurm/ec-train.sbatch" >out 2>err
rc=$?
[ $rc = 2 ] && [ "$(grep -c . err)" = 1 ] && grep -q "not inside a Slurm job" err || fail "ec-train.sbatch outside Slurm: exit $rc: $(cat err)"
# run-train.sh: a `ckpt-train latest` that fails other than with 5 ("no complete checkpoint") stops
# the step; it started a new run over the directory (its errors went to /dev/null).
mkdir -p stub ck
printf '#!/bin/sh\ncase "$1" in latest) echo "ckpt-train: error: ck: boom" >&2; exit 4 ;; *) echo ran >>"%s/ran"; exit 0 ;; esac\n' "$dir" >stub/ckpt-train
chmod +x stub/ckpt-train
RESIL_BIN=$dir/stub CKPT_DIR=ck LAUNCH=env bash "$src/scripts/hpc/run-train.sh" >out 2>err
rc=$?
[ $rc = 4 ] && grep -q "ckpt-train latest --ckpt-dir ck failed (exit 4): ckpt-train: error: ck: boom" err || fail "run-train.sh with a failing latest: exit $rc: $(cat out err)"
[ -e ran ] && fail "run-train.sh started a run after latest failed"
# submit-campaign.sh: SHARDS must be a count (0, -2, abc, 1e3 made an --array of 0--1), CONFIG a
# file, neither CONFIG nor OUT begins with '-'; refused before anything is submitted or made. A stand-in sbatch records any submission.
mkdir -p sb; printf '#!/bin/sh\necho submitted >>"%s/submitted"; echo 1\n' "$dir" >sb/sbatch; chmod +x sb/sbatch
echo '{}' >c.json
echo '{}' >./-c.json  # CONFIG and OUT that begin with '-' (realpath took them for options: exit 1)
for a in "c.json o 0" "c.json o -2" "c.json o abc" "c.json o 1e3" "c.json o 1000001" "c.json o 007" "c.json" "c.json o 2 x" \
         "-c.json o" "c.json -o" "c.json --out 2"; do
  # shellcheck disable=SC2086
  PATH=$dir/sb:$PATH bash "$src/scripts/slurm/submit-campaign.sh" $a >out 2>err
  rc=$?
  [ $rc = 2 ] && [ "$(grep -c . err)" = 1 ] && grep -q "^submit-campaign.sh: " err || fail "submit-campaign.sh $a: exit $rc, expected 2 and one line: $(cat err)"
done
PATH=$dir/sb:$PATH bash "$src/scripts/slurm/submit-campaign.sh" missing.json o 2 >out 2>err
rc=$?
[ $rc = 3 ] && grep -q "CONFIG missing.json: not a readable file" err || fail "submit-campaign.sh with a missing CONFIG: exit $rc: $(cat err)"
[ -e submitted ] && fail "a refused submit-campaign.sh submitted a job"
[ -e o ] && fail "a refused submit-campaign.sh made OUT"
PATH=$dir/sb:$PATH bash "$src/scripts/slurm/submit-campaign.sh" c.json o 3 >out 2>err || fail "submit-campaign.sh c.json o 3: $(cat err)"
[ "$(grep -c . submitted)" = 2 ] || fail "expected the array and the report job"
echo "ok: scheduler scripts outside their schedulers"
