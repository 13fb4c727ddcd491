#!/bin/sh
# Run bench_train_gpu.py with the python that has a CUDA build of torch ($RESIL_BENCH_PYTHON,
# default /usr/bin/python3: on a GPU machine the interpreter with torch.cuda may be another one).
exec "${RESIL_BENCH_PYTHON:-/usr/bin/python3}" "$(dirname "$0")/bench_train_gpu.py" "$@"
