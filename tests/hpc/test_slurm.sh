#!/usr/bin/env bash
# Slurm integration test (a real slurmctld + slurmd + munged on this machine, private ports/dirs):
#  1. a dp training job (srun --mpi=pmi2, 2 ranks) preempted with `scancel --signal=TERM`: it
#     checkpoints, exits 75, the batch script requeues it, the requeued job resumes from the newest
#     complete checkpoint, and its final model equals an uninterrupted run bit for bit;
#  2. a fault-injection campaign of that model submitted as a job array + a report job chained with
#     --dependency=afterok; the merged report must equal a single-process run of the same campaign.
# Every daemon started here is stopped by PID at exit.
# usage: test_slurm.sh SOURCE_DIR BIN_DIR
set -euo pipefail
src=$(realpath "$1")
bin=$(realpath "$2")
work=$(mktemp -d /tmp/resil-slurm-XXXXXX)
cluster=$work/cluster
export RESIL_SLURM_PORT=$((20000 + $$ % 20000))
cleanup() {
  "$src/scripts/slurm/local-cluster.sh" stop "$cluster" || true
  rm -rf "$work"
}
trap cleanup EXIT
eval "$("$src/scripts/slurm/local-cluster.sh" start "$cluster")"
echo "slurm up: $SLURM_CONF"
export RESIL_BIN=$bin RESIL_ROOT=$src

job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1; }
wait_job() {  # wait_job ID TIMEOUT -> final state on stdout
  local id=$1 t=$2 s=""
  for _ in $(seq $((t * 5))); do
    s=$(job_state "$id")
    case $s in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE) echo "$s"; return 0 ;; esac
    sleep 0.2
  done
  echo "TIMEOUT_WAITING($s)"
}
compare_models() {  # compare_models A B: /model and /optimizer identical bit for bit
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
names = []
for g in ("model", "optimizer"):
    a[g].visititems(lambda n, o: names.append(f"/{g}/{n}") if isinstance(o, h5py.Dataset) else None)
assert names, "no datasets"
for n in names:
    x, y = a[n][...], b[n][...]
    assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), f"{n} differs"
print(f"bit-identical: {len(names)} datasets")
PY
}

cd "$work"

# ---------------------------------------------------------------- 2. preemption and requeue
echo "== preemption: uninterrupted reference run"
train_args="--limit 4000 --test-limit 500 --batch 32"
mpiexec -n 2 "$bin/ckpt-train" train --model mlp --epochs 3 --seed 5 --parallel dp --ckpt-dir ref $train_args > ref.log
ref=$("$bin/ckpt-train" latest --ckpt-dir ref)

echo "== preemption: the same run as a Slurm job, preempted with SIGTERM"
job=$(NP=2 MODEL=mlp EPOCHS=3 SEED=5 PARALLEL=dp CKPT_DIR=$work/pre TRAIN_ARGS="$train_args" \
  sbatch --parsable --export=ALL -n 2 -o "$work/train-%j.out" "$src/scripts/slurm/train.sbatch")
# Preempt mid-run: after the first epoch's checkpoint exists, while epoch 2 is in progress.
for _ in $(seq 600); do
  ls pre/*.h5.done >/dev/null 2>&1 && break
  sleep 0.1
done
ls pre/*.h5.done >/dev/null 2>&1 || { cat train-*.out; echo "no checkpoint appeared"; exit 1; }
scancel --signal=TERM "$job"
# Slurm keeps a requeued job pending for ~2 min (Reason=BeginTime); that wait tests nothing of
# resil's and was most of this test's time: make it eligible at once.
for _ in $(seq 600); do
  info=$(scontrol show job "$job" 2>/dev/null || true)
  if [[ $info == *JobState=PENDING* && $info == *Reason=BeginTime* ]]; then
    scontrol update JobId="$job" StartTime=now
    break
  fi
  [[ $info =~ JobState=(COMPLETED|FAILED|CANCELLED) ]] && break
  sleep 0.1
done
state=$(wait_job "$job" 300)
cat train-*.out
[[ $state == COMPLETED ]] || { echo "train job ended $state"; exit 1; }
grep -q "preempted after a checkpoint; requeueing" train-*.out || { echo "the job was not preempted"; exit 1; }
grep -q "resuming from" train-*.out || { echo "the requeued job did not resume"; exit 1; }
restarts=$(scontrol show job "$job" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
[[ ${restarts:-0} -ge 1 ]] || { echo "job was not requeued (Restarts=$restarts)"; exit 1; }
final=$("$bin/ckpt-train" latest --ckpt-dir pre)
compare_models "$ref" "$final"
echo "preempted + requeued run == uninterrupted run"

# ---------------------------------------------------------------- 1. campaign array + report
echo "== campaign: 2 array tasks + a report job chained with afterok"
cat > campaign.json <<JSON
{"name": "slurm-eval", "checkpoint": "$ref",
 "command": ["$bin/ckpt-train", "eval", "--from", "{ckpt}", "--summary", "{out}", "--test-limit", "200"],
 "trials": 8, "seed": 3, "timeout_s": 120, "inject": {"flips": 1, "role": "model"}, "tolerance": 0.01}
JSON
ids=$("$src/scripts/slurm/submit-campaign.sh" campaign.json "$work/camp" 2)
echo "$ids"
report_job=${ids##* }
state=$(wait_job "$report_job" 300)
cat resil-campaign-*.out resil-report-*.out 2>/dev/null | tail -20 || true
[[ $state == COMPLETED ]] || { echo "report job ended $state"; exit 1; }
[[ -s camp/report.json && -s camp/report.md ]] || { echo "no merged report"; exit 1; }
echo "== campaign: the same campaign in one process"
"$bin/ckpt-flip" campaign campaign.json --out "$work/single" -q
"$bin/ckpt-flip" report "$work/single" --json "$work/single/report.json" --no-plots > /dev/null
/usr/bin/python3 - camp/report.json single/report.json <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for key in ("overall", "by", "reweighted"):
    assert a[key] == b[key], f"report section '{key}' differs between the Slurm shards and one process"
print("merged Slurm report == single-process report:", {k: v["x"] for k, v in a["overall"]["classes"].items() if v["x"]})
PY
echo "slurm integration OK"
