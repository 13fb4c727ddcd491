#!/usr/bin/env bash
# The main job on the embedded default (Fashion-MNIST from Debian's dataset-fashion-mnist):
# train a small MLP deterministically -> HDF5 checkpoint -> inspect it -> inject bit flips with a
# flip log -> diff/scan -> evaluate the altered checkpoint -> revert it exactly -> size a campaign
# (Leveugle) -> a fault-injection campaign of a few dozen trials -> report with classes, Wilson and
# Clopper-Pearson intervals and plots -> two-level FIT with a fault model from published DRAM field data.
#   OUT (default out/demo in the source tree; a relative OUT is from the caller's directory),
#   JOBS (default nproc), BUILD_DIR (default build), TRIALS (default 36). No arguments.
# OUT is replaced: it must be absent, empty, or an earlier demo's output (it holds .resil-demo, or
# the layout the demo writes); anything else is refused (exit 2), never deleted.
set -euo pipefail
case "${1:-}" in
  '') ;;
  -h|--help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "demo.sh: error: unknown argument '$1' (settings are environment variables: OUT, JOBS, BUILD_DIR, TRIALS; see --help)" >&2; exit 2 ;;
esac
if [[ -n ${OUT:-} && $OUT != /* ]]; then OUT=$PWD/$OUT; fi
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
out=${OUT:-out/demo}
if [[ -e $out || -L $out ]]; then
  if [[ -L $out || ! -d $out ]]; then
    echo "demo.sh: error: OUT=$out exists and is not a directory: choose another OUT" >&2; exit 2
  fi
  if [[ -n $(ls -A "$out") && ! -e $out/.resil-demo && ! ( -d $out/ckpt && -e $out/flips.jsonl ) ]]; then
    echo "demo.sh: error: OUT=$out holds files that are not an earlier demo's output (no .resil-demo): choose another OUT, or empty it yourself" >&2
    exit 2
  fi
fi
jobs=${JOBS:-$(nproc)}
trials=${TRIALS:-36}

scripts/setup.sh
if [[ ! -x $build/bin/ckpt-train || ! -x $build/bin/ckpt-flip ]]; then
  echo "== building resil ($build)"
  cmake -S . -B "$build" >/dev/null
  cmake --build "$build" -j "$jobs" --target ckpt-train ckpt-flip
fi
bin=$build/bin
rm -rf "$out"
mkdir -p "$out"
: >"$out/.resil-demo"  # an earlier demo's output, which the next run may replace

echo "== 1. train an MLP on Fashion-MNIST (1 epoch on 12000 samples, seed 7)"
"$bin/ckpt-train" train --model mlp --epochs 1 --seed 7 --limit 12000 --ckpt-dir "$out/ckpt" \
  --metrics "$out/metrics.jsonl" --summary "$out/golden.json"
ckpt=$("$bin/ckpt-train" latest --ckpt-dir "$out/ckpt")
echo "checkpoint: $ckpt"

echo "== 2. inspect the checkpoint"
"$bin/ckpt-flip" inspect "$ckpt"

echo "== 3. inject 20 single-bit flips into the model (seed 11), logging every flip"
"$bin/ckpt-flip" inject "$ckpt" -o "$out/altered.h5" --seed 11 --flips 20 --role model --log "$out/flips.jsonl"

echo "== 4. what changed, and would a scan notice without the golden copy?"
"$bin/ckpt-flip" diff "$ckpt" "$out/altered.h5"
set +e
"$bin/ckpt-flip" scan "$out/altered.h5"
echo "(scan exit code $?: 0 clean, 10 suspect)"
set -e

echo "== 5. evaluate golden vs altered"
"$bin/ckpt-train" eval --from "$ckpt" --summary "$out/eval-golden.json" | tail -1
set +e
"$bin/ckpt-train" eval --from "$out/altered.h5" --summary "$out/eval-altered.json" | tail -1
echo "(eval exit code ${PIPESTATUS[0]}: 6 means NaN/Inf reached the output)"
set -e

echo "== 6. revert the flips exactly, from the log"
"$bin/ckpt-flip" revert "$out/altered.h5" --log "$out/flips.jsonl"
h5diff -q "$ckpt" "$out/altered.h5" /model /model \
  && echo "reverted: h5diff finds /model identical to the golden checkpoint again"

echo "== 7. how many trials for a 5% margin at 95% confidence (Leveugle et al., DATE 2009)?"
"$bin/ckpt-flip" plan "$ckpt" --role model --margin 0.05

echo "== 8. a campaign: $trials single-bit trials over the model, stratified by field (sign/exponent/mantissa),"
echo "      each evaluated with ckpt-train eval and classified against the golden run"
cat > "$out/campaign.json" <<EOF
{"name": "demo-mlp-eval", "checkpoint": "$(realpath "$ckpt")",
 "command": ["$(realpath "$bin")/ckpt-train", "eval", "--from", "{ckpt}", "--summary", "{out}", "--test-limit", "2000"],
 "trials": $trials, "seed": 2024, "timeout_s": 120,
 "inject": {"flips": 1, "model": "flip", "role": "model", "strata": "field"},
 "metric": "test_accuracy", "tolerance": 0.01}
EOF
"$bin/ckpt-flip" campaign "$out/campaign.json" --out "$out/campaign" --quiet
echo "   and a smaller one with adjacent double-bit faults (the second pattern of the fault model)"
sed -e 's/"model": "flip"/"model": "adjacent:2"/' -e 's/demo-mlp-eval/demo-mlp-eval-adj2/' -e "s/\"trials\": $trials/\"trials\": 12/" \
  "$out/campaign.json" > "$out/campaign-adj2.json"
"$bin/ckpt-flip" campaign "$out/campaign-adj2.json" --out "$out/campaign-adj2" --quiet

echo "== 9. report: classes and rates with Wilson / Clopper-Pearson intervals, reweighted to the fault space"
"$bin/ckpt-flip" report "$out/campaign" --json "$out/campaign/report.json" --markdown "$out/campaign/report.md"

echo "== 10. two-level SDC/DUE FIT: DRAM field-data fault model, no ECC (sources and assumptions: docs/reference/fault-models.md)"
"$bin/ckpt-flip" fit --fault-model examples/fault-models/dram-field-noecc.json --seed 1 \
  --results "$out/campaign" --results "$out/campaign-adj2" --json "$out/fit.json"

echo "== done: outputs in $out (metrics.jsonl, flips.jsonl, golden.json, eval-*.json, campaign/, fit.json)"
echo "== the report is $out/campaign/report.md (plots $out/campaign/plot-*.png, JSON $out/campaign/report.json)"
