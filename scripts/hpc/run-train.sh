#!/usr/bin/env bash
# Scheduler-neutral training step used by slurm/train.sbatch and pbs/train.pbs.
# Starts `ckpt-train train`, or resumes from the newest complete checkpoint in CKPT_DIR when one
# exists (a requeued job continues where it stopped). Exit 75 means "checkpointed after
# SIGTERM/SIGUSR1: requeue me"; the batch script requeues on it. The launcher's own exit status is
# not trusted for that: MPICH 4.0's mpiexec sometimes returns 0 although every rank exited 75, so
# the run's summary JSON (CKPT_DIR/summary.json, "preempted": true) also turns the result into 75.
#
# Environment (defaults in brackets):
#   RESIL_BIN [build/bin]    where ckpt-train lives
#   LAUNCH   [mpiexec -n NP] how to start NP ranks (slurm: "srun --mpi=pmi2")
#   NP [4] MODEL [mlp] EPOCHS [2] SEED [1] PARALLEL [dp] CKPT_DIR [ckpts]
#   TRAIN_ARGS []  extra `ckpt-train train` options (a resume takes them from the checkpoint's config)
#   RESUME_ARGS [] extra `ckpt-train resume` options
set -uo pipefail
set -f  # LAUNCH is split into words but never globbed (a nodelist like node[1-2] stays as it is)
case "${1:-}" in
  -h|--help)
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    echo "Example: NP=2 EPOCHS=3 CKPT_DIR=\$PWD/ck scripts/hpc/run-train.sh   (run it again after exit 75 to continue)"
    exit 0 ;;
esac
bin=${RESIL_BIN:-build/bin}
np=${NP:-4}
launch=${LAUNCH:-mpiexec -n $np}
ckpt_dir=${CKPT_DIR:-ckpts}
mkdir -p "$ckpt_dir"

summary=$ckpt_dir/summary.json
rm -f "$summary"
# Exit 5 means "no complete checkpoint": a new run. Any other failure (checkpoints there but
# damaged, a directory that cannot be read) stops here: starting over would write over them.
latest=$("$bin/ckpt-train" latest --ckpt-dir "$ckpt_dir" 2>&1)  # on success only the path is printed
lrc=$?
if [[ $lrc != 0 && $lrc != 5 ]]; then
  echo "resil: error: ckpt-train latest --ckpt-dir $ckpt_dir failed (exit $lrc): ${latest:0:500}; not starting over" >&2
  exit "$lrc"
fi
if [[ $lrc == 0 && -n $latest ]]; then
  echo "resil: resuming from $latest"
  # shellcheck disable=SC2086
  $launch "$bin/ckpt-train" resume --from "$latest" --epochs "${EPOCHS:-2}" --ckpt-dir "$ckpt_dir" --summary "$summary" ${RESUME_ARGS:-}
else
  echo "resil: starting a new run in $ckpt_dir"
  # shellcheck disable=SC2086
  $launch "$bin/ckpt-train" train --model "${MODEL:-mlp}" --epochs "${EPOCHS:-2}" --seed "${SEED:-1}" \
    --parallel "${PARALLEL:-dp}" --ckpt-dir "$ckpt_dir" --summary "$summary" ${TRAIN_ARGS:-}
fi
rc=$?
if [[ $rc != 75 && -f $summary ]] && grep -Eq '"preempted": *true' "$summary"; then
  echo "resil: launcher returned $rc but the run was preempted (summary.json): exiting 75"
  rc=75
fi
exit $rc
