#!/bin/sh
# A CPU process never loads cuBLAS (dlopen'ed by the CUDA backend on first use): PROGRAM --help
# runs without libcublas or libcublasLt being mapped (their start-up cost ~70 ms, ~200 MB each time).
# usage: no_cublas_at_start.sh PROGRAM
if LD_DEBUG=files "$1" --help 2>&1 >/dev/null | grep 'file=libcublas'; then
  echo "$1 loads cuBLAS at start"
  exit 1
fi
echo "$1 starts without cuBLAS"
