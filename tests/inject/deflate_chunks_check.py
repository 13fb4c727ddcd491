"""h5py side of test_deflate_chunks.cpp.
  make OUT       gzip datasets the way h5py users write them (default level 4 with shuffle, other
                 levels, no shuffle, edge chunks, big-endian, fletcher32 which must fall back)
  compare A B    every dataset of A and B: same dtype, shape, chunks and filter pipeline (compression,
                 level, shuffle, fletcher32), and every value bitwise equal as h5py reads it."""
import sys

import h5py
import numpy as np


def make(out):
    rng = np.random.default_rng(7)
    with h5py.File(out, "w") as f:
        f.create_dataset("h5py/default_f4", data=rng.standard_normal((61, 47)).astype("f4"), chunks=(16, 10),
                         compression="gzip", shuffle=True)
        f.create_dataset("h5py/l1_f8", data=rng.standard_normal((33, 20)).astype("f8"), chunks=(10, 7),
                         compression="gzip", compression_opts=1, shuffle=True)
        f.create_dataset("h5py/l9_f2_noshuffle", data=rng.standard_normal((50, 9)).astype("f2"), chunks=(12, 4),
                         compression="gzip", compression_opts=9)
        f.create_dataset("h5py/l6_i8", data=rng.integers(-1000, 1000, (7, 11, 13)).astype("i8"), chunks=(3, 4, 5),
                         compression="gzip", compression_opts=6, shuffle=True)
        f.create_dataset("h5py/be_f4", data=rng.standard_normal(301).astype(">f4"), chunks=(64,),
                         compression="gzip", shuffle=True)
        f.create_dataset("h5py/fletcher32", data=rng.standard_normal((40, 30)).astype("f4"), chunks=(16, 16),
                         compression="gzip", shuffle=True, fletcher32=True)


def pipeline(d):
    return (d.dtype.str, d.shape, d.chunks, d.compression, d.compression_opts, d.shuffle, d.fletcher32)


def compare(a, b):
    bad = 0
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        names = []
        fa.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for n in names:
            da, db = fa[n], fb[n]
            if pipeline(da) != pipeline(db):
                print(f"{n}: pipeline {pipeline(da)} vs {pipeline(db)}")
                bad += 1
                continue
            va, vb = da[...], db[...]
            ua = va.view(f"u{va.dtype.itemsize}") if va.ndim else va
            ub = vb.view(f"u{vb.dtype.itemsize}") if vb.ndim else vb
            if not np.array_equal(ua, ub):
                print(f"{n}: {int(np.count_nonzero(ua != ub))} values differ")
                bad += 1
        print(f"compared {len(names)} datasets, {bad} differ")
    return 1 if bad or not names else 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
        sys.exit(0)
    sys.exit(compare(sys.argv[2], sys.argv[3]))
