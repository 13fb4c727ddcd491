#!/usr/bin/env bash
# Full Fashion-MNIST accuracy runs for ckpt-train's quality targets (long on 2 cores; the last run:
# docs/results/2026-11-21-accuracy.md):
#   MLP >= 88% and CNN >= 90% test accuracy within 10 epochs; DP with 4 ranks within 0.5 points of 1 rank.
# Usage: scripts/accuracy.sh [BUILD_DIR] [OUT_DIR]   (BUILD_DIR default build, OUT_DIR default accuracy-runs)
set -euo pipefail
build=${1:-build}
out=${2:-accuracy-runs}
ct=
for c in "$build"/bin/ckpt-train "$build"/apps/ckpt-train/ckpt-train; do [[ -x $c && -z $ct ]] && ct=$c; done
[[ -n $ct ]] || { echo "accuracy.sh: no ckpt-train under $build" >&2; exit 2; }
mkdir -p "$out"
run() {  # name nprocs args...
  local name=$1 np=$2; shift 2
  rm -rf "$out/$name"
  local pre=()
  ((np > 1)) && pre=(mpiexec -n "$np")
  "${pre[@]}" "$ct" train --seed 1 --epochs 10 --ckpt-every 10 --ckpt-dir "$out/$name" \
    --metrics "$out/$name.jsonl" --summary "$out/$name.json" "$@"
}
# The defaults are the recipes (Adam, batch 64; mlp lr 1e-3 decay 0.75/epoch, cnn lr 2e-3 decay 0.8/epoch).
run mlp 1 --model mlp
run cnn 1 --model cnn
run mlp_dp4 4 --model mlp --parallel dp
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
r = {n: json.load(open(f"{out}/{n}.json")) for n in ("mlp", "cnn", "mlp_dp4")}
for n, s in r.items():
    print(f"{n:8s} test_accuracy {100 * s['test_accuracy']:.2f}%  final_loss {s['final_loss']:.4f}  {s['wall_seconds']:.0f} s")
gap = 100 * abs(r["mlp"]["test_accuracy"] - r["mlp_dp4"]["test_accuracy"])
ok = r["mlp"]["test_accuracy"] >= 0.88 and r["cnn"]["test_accuracy"] >= 0.90 and gap <= 0.5
print(f"dp4 vs 1 rank: {gap:.2f} points;", "targets met" if ok else "TARGETS NOT MET")
sys.exit(0 if ok else 1)
PY
