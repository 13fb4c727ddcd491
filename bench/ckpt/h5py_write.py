"""Baseline for bench_ckpt_io: write the same arrays with h5py, fsync, and print the seconds.

usage: h5py_write.py OUT.h5 N_TENSORS ELEMS_PER_TENSOR
"""
import os
import sys
import time

import h5py
import numpy as np

out, n, elems = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
arrays = [np.full(elems, float(i), dtype=np.float32) for i in range(n)]
t0 = time.perf_counter()
with h5py.File(out, "w") as f:
    for i, a in enumerate(arrays):
        f.create_dataset(f"/model/p{i}", data=a)
fd = os.open(out, os.O_RDONLY)
os.fsync(fd)
os.close(fd)
print(f"{time.perf_counter() - t0:.6f}")
