#!/bin/sh
# Run bench_train_gpu.py (or, after `--script NAME` following CKPT_TRAIN, bench/train/NAME) with the
# python that has a CUDA build of torch ($RESIL_BENCH_PYTHON, default /usr/bin/python3: on a GPU
# machine the interpreter with torch.cuda may be another one).
here=$(dirname "$0")
ct=$1
shift
script=bench_train_gpu.py
if [ "${1:-}" = --script ]; then
  script=$2
  shift 2
fi
exec "${RESIL_BENCH_PYTHON:-/usr/bin/python3}" "$here/$script" "$ct" "$@"
