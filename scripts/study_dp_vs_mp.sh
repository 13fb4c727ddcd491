#!/usr/bin/env bash
# The earlier field-stratified dp-vs-mp grid (docs/guide/campaigns.md, "The earlier field-stratified grid"); the
# study that replaces it is scripts/study/dp_vs_mp.py.
# Fashion-MNIST MLP and CNN, trained with dp (RANKS ranks) and with mp (RANKS pipeline stages). Per
# (model, mode) one golden run of EPOCHS epochs with a checkpoint after every epoch; then resume
# campaigns: each trial flips bits in one checkpoint, resumes it under mpiexec to the END of the golden
# schedule (epoch EPOCHS) and is classified against the golden resume of the same checkpoint.
#   injection points: early = the checkpoint after epoch 1, late = the one after epoch EPOCHS-1
#   field campaigns (strata "field", TRIALS/3 trials per sign / exponent / mantissa):
#     state ROLES (model, optimizer) x POINTS x flip counts FLIPS per trial, and the extra flip
#     counts MULTI_FLIPS for the state MULTI_ROLES at MULTI_POINTS
#   bit campaigns (strata "bit", BIT_TRIALS/32 trials per bit position): model state of BIT_MODELS at
#     BIT_POINT, 1 flip per trial
# Writes $RESULTS/dp-vs-mp-grid.md (tables, plots, Findings; scripts/study_dp_vs_mp_report.py), its PNGs and
# $RESULTS/dp-vs-mp-grid-results.jsonl.gz (every trial, slimmed); campaign data stays under $OUT.
# Resumable: re-running with the same parameters reuses the golden runs and skips finished trials, so
# kill it at any point (or run MODELS=mlp, then MODELS=cnn, in separate invocations) and start it again.
#
# Usage: scripts/study_dp_vs_mp.sh [--full]
# --full is 26 campaigns, 8,480 trials: 8.8 h on the 2-core development machine (docs/results/dp-vs-mp-grid.md);
# use JOBS=4 on 16 cores; the variables MODELS, MODES, MULTI_FLIPS and BIT_TRIALS split it into pieces.
# Parameters (environment): small default (about a minute on 2 cores) / --full
#   MODELS            mlp / "mlp cnn"         MODES       "dp mp"       RANKS  4
#   EPOCHS            3 / 3 (golden epochs; trials resume to EPOCHS)
#   MLP_TRAIN         "--limit 512 --batch 64" / "--limit 40000 --batch 256 --lr 3e-3 --lr-decay 0.5"
#   CNN_TRAIN         "--limit 512 --batch 64" / "--limit 40000 --batch 64 --lr 3e-3 --lr-decay 0.6"  (extra `ckpt-train train` options)
#   TEST_LIMIT        200 / 2000 (test samples every run and trial evaluates; the golden final
#                     checkpoint is also evaluated on all 10,000 for the accuracy bar)
#   ROLES "model optimizer"  POINTS "early late"  FLIPS 1 / 1
#   MULTI_FLIPS 10 / "10 100"  MULTI_ROLES model  MULTI_POINTS late
#   TRIALS            3 / 300 (per field campaign)
#   BIT_MODELS mlp  BIT_POINT late  BIT_TRIALS 4 / 640
#   JOBS              2 (ckpt-flip campaign --jobs)   TIMEOUT 300 / 900 (s per trial)   SEED 1
#   BUILD_DIR build  OUT out/study / out/study-full  RESULTS docs/results  PYTHON /usr/bin/python3  MPIEXEC mpiexec
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
for a in "$@"; do
  case $a in
    --full) full=1 ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "study_dp_vs_mp.sh: error: unknown argument '$a' (usage: study_dp_vs_mp.sh [--full])" >&2; exit 2 ;;
  esac
done
if ((full)); then
  : "${MODELS:=mlp cnn}" "${TEST_LIMIT:=2000}" "${TRIALS:=300}" "${MULTI_FLIPS=10 100}" "${BIT_TRIALS:=640}"
  : "${TIMEOUT:=900}" "${OUT:=out/study-full}"
  : "${MLP_TRAIN:=--limit 40000 --batch 256 --lr 3e-3 --lr-decay 0.5}" "${CNN_TRAIN:=--limit 40000 --batch 64 --lr 3e-3 --lr-decay 0.6}"
fi
build=${BUILD_DIR:-build}
out=${OUT:-out/study}
results=${RESULTS:-docs/results}
models=${MODELS:-mlp}
modes=${MODES:-dp mp}
ranks=${RANKS:-4}
epochs=${EPOCHS:-3}
test_limit=${TEST_LIMIT:-200}
roles=${ROLES:-model optimizer}
points=${POINTS:-early late}
flips_all=${FLIPS:-1}
multi_flips=${MULTI_FLIPS-10}
multi_roles=${MULTI_ROLES:-model}
multi_points=${MULTI_POINTS:-late}
trials=${TRIALS:-3}
bit_models=${BIT_MODELS:-mlp}
bit_point=${BIT_POINT:-late}
bit_trials=${BIT_TRIALS:-4}
jobs=${JOBS:-2}
timeout=${TIMEOUT:-300}
seed=${SEED:-1}
py=${PYTHON:-/usr/bin/python3}
mpiexec=${MPIEXEC:-mpiexec}
declare -A recipe=([mlp]=${MLP_TRAIN:---limit 512 --batch 64} [cnn]=${CNN_TRAIN:---limit 512 --batch 64})
bin=$(realpath "$build/bin")
[[ -x $bin/ckpt-train && -x $bin/ckpt-flip ]] || { echo "study_dp_vs_mp.sh: error: build ckpt-train and ckpt-flip first ($build/bin)" >&2; exit 2; }
((epochs >= 3)) || [[ $points != *early* || $points != *late* ]] || {
  echo "study_dp_vs_mp.sh: error: EPOCHS=$epochs: early (after epoch 1) and late (after epoch EPOCHS-1) need EPOCHS >= 3" >&2; exit 2; }
mkdir -p "$out" "$results"
out=$(realpath "$out")
t0=$(date +%s)
# One line per invocation in $out/wall-seconds (the report states the sum), also when one is interrupted.
wall_recorded=0
record_wall() { ((wall_recorded)) || echo "$(($(date +%s) - t0))" >> "$out/wall-seconds"; wall_recorded=1; }
trap record_wall EXIT
# The 1-minute load average as this invocation starts (before its own processes): other work on the
# machine, which the report states (a loaded machine slows trials; hangs are judged by the timeout).
awk '{print $1}' /proc/loadavg >> "$out/start-load"
# name model mode role point flips strata dir, one line per campaign ever run in $out (invocations that
# run other MODELS/MODES add theirs): what the report reads.
campaigns=$out/campaigns.tsv
touch "$campaigns"

# The checkpoint of POINT in a golden run directory: after epoch 1 (early) or after epoch EPOCHS-1 (late).
checkpoint_at() {
  local dir=$1 point=$2 pattern=ckpt-step*.h5
  [[ $3 == mp ]] && pattern=ckpt-step*.manifest.json
  local -a all
  mapfile -t all < <(cd "$dir" && ls -1 $pattern | sort)
  ((${#all[@]} == epochs)) || { echo "study_dp_vs_mp.sh: error: $dir holds ${#all[@]} checkpoints, not $epochs (one per epoch)" >&2; exit 3; }
  case $point in
    early) echo "$dir/${all[0]}" ;;
    late) echo "$dir/${all[epochs - 2]}" ;;
    *) echo "study_dp_vs_mp.sh: error: unknown injection point '$point' (early or late)" >&2; exit 2 ;;
  esac
}

# campaign NAME MODEL MODE ROLE POINT FLIPS STRATA TRIALS: write its config, run (or continue) it, report.
campaign() {
  local name=$1 model=$2 mode=$3 role=$4 point=$5 flips=$6 strata=$7 n=$8
  local ckpt
  ckpt=$(checkpoint_at "$out/$model-$mode/ckpt" "$point" "$mode")
  printf '%s\n' \
    "{\"name\": \"$name\", \"checkpoint\": \"$ckpt\"," \
    " \"command\": [\"$mpiexec\", \"-n\", \"$ranks\", \"$bin/ckpt-train\", \"resume\", \"--from\", \"{ckpt}\", \"--epochs\", \"$epochs\"," \
    "             \"--ckpt-dir\", \"{dir}\", \"--summary\", \"{out}\"]," \
    " \"trials\": $n, \"seed\": $seed, \"timeout_s\": $timeout," \
    " \"inject\": {\"flips\": $flips, \"model\": \"flip\", \"role\": \"$role\", \"strata\": \"$strata\"}," \
    " \"metric\": \"test_accuracy\", \"tolerance\": 0.01}" > "$out/$name.json"
  echo "== campaign $name: $n trials, $flips flip(s) per trial, strata $strata, $point checkpoint $(basename "$ckpt")"
  "$bin/ckpt-flip" campaign "$out/$name.json" --out "$out/$name" --jobs "$jobs" --quiet | grep '^shard' || true
  "$bin/ckpt-flip" report "$out/$name" --json "$out/$name/report.json" --no-plots > /dev/null
  cut -f1 "$campaigns" | grep -qxF "$name" ||
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$model" "$mode" "$role" "$point" "$flips" "$strata" "$out/$name" >> "$campaigns"
}

for model in $models; do
  for mode in $modes; do
    run=$out/$model-$mode
    params="ranks=$ranks epochs=$epochs seed=$seed test_limit=$test_limit ${recipe[$model]}"
    if [[ -f $run/golden-train.json && $(cat "$run/golden-params" 2> /dev/null) != "$params" ]]; then
      echo "study_dp_vs_mp.sh: error: $run was trained with '$(cat "$run/golden-params" 2> /dev/null)', not '$params': use another OUT" >&2
      exit 2
    fi
    # shellcheck disable=SC2086  # the recipe is a list of options
    if [[ ! -f $run/golden-train.json ]]; then
      echo "== golden run: $model, $mode, $ranks ranks, $epochs epochs, ${recipe[$model]}, test limit $test_limit"
      rm -rf "$run"
      mkdir -p "$run"
      s=$(date +%s)
      "$mpiexec" -n "$ranks" "$bin/ckpt-train" train --model "$model" --parallel "$mode" --epochs "$epochs" --seed "$seed" \
        ${recipe[$model]} --test-limit "$test_limit" --ckpt-dir "$run/ckpt" --metrics "$run/golden-metrics.jsonl" \
        --summary "$run/train.json" > "$run/train.log"
      echo "$(($(date +%s) - s))" > "$run/train-seconds"
      echo "${recipe[$model]}" > "$run/recipe"
      echo "$params" > "$run/golden-params"
      # The accuracy bar is read on the whole test set (10,000 images), one process.
      "$bin/ckpt-train" eval --from "$("$bin/ckpt-train" latest --ckpt-dir "$run/ckpt")" --test-limit 10000 \
        --summary "$run/golden-eval-full.json" > /dev/null
      mv "$run/train.json" "$run/golden-train.json"
    fi
    for role in $roles; do
      for point in $points; do
        for f in $flips_all; do campaign "$model-$mode-$role-$point-f$f" "$model" "$mode" "$role" "$point" "$f" field "$trials"; done
      done
    done
    for role in $multi_roles; do
      for point in $multi_points; do
        for f in $multi_flips; do
          [[ " $flips_all " == *" $f "* && " $roles " == *" $role "* && " $points " == *" $point "* ]] && continue  # already run above
          campaign "$model-$mode-$role-$point-f$f" "$model" "$mode" "$role" "$point" "$f" field "$trials"
        done
      done
    done
    if [[ " $bit_models " == *" $model "* ]] && ((bit_trials > 0)); then
      campaign "$model-$mode-model-$bit_point-bits" "$model" "$mode" model "$bit_point" 1 bit "$bit_trials"
    fi
  done
done
secs=$(($(date +%s) - t0))
record_wall

echo "== $results/dp-vs-mp-grid.md, plots and results"
"$py" scripts/study_dp_vs_mp_report.py "$out" "$results" \
  "ranks=$ranks" "epochs=$epochs" "test_limit=$test_limit" "seed=$seed" "jobs=$jobs" "full=$full"
echo "== done in $secs s: $results/dp-vs-mp-grid.md (campaign data in $out)"
