#!/usr/bin/python3
"""corrupt.py nan SRC DST DATASET | truncate SRC DST: make altered copies of a checkpoint."""
import shutil, sys, os
import h5py, numpy as np

mode, src, dst = sys.argv[1:4]
if mode == "idxdir":  # an MNIST-format directory whose training images are truncated
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        shutil.copyfile(os.path.join(src, f), os.path.join(dst, f))
    img = os.path.join(dst, "train-images-idx3-ubyte.gz")
    os.truncate(img, os.path.getsize(img) // 3)
    sys.exit(0)
shutil.copyfile(src, dst)
if mode == "nan":
    with h5py.File(dst, "r+") as h:
        d = h[sys.argv[4]]
        a = d[()]
        a.flat[0] = np.nan
        d[...] = a
elif mode == "truncate":
    os.truncate(dst, os.path.getsize(dst) // 2)
