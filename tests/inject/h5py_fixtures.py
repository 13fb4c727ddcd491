"""Interop fixtures for ckpt-flip, written the way users write them with h5py:
a PyTorch-style state_dict (flat names with dots, contiguous, int64 num_batches_tracked),
Keras-style nested groups with attributes, chunked+gzip+shuffle, fp16, fp64, ints, 5-D, big-endian."""
import sys

import h5py
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(1234)
with h5py.File(out, "w") as f:
    f.attrs["framework"] = "pytorch"
    f["conv1.weight"] = rng.standard_normal((16, 3, 3, 3)).astype("f4")
    f["conv1.bias"] = rng.standard_normal(16).astype("f4")
    f["bn1.running_mean"] = rng.standard_normal(16).astype("f4")
    f["bn1.num_batches_tracked"] = np.int64(938)
    f["fc.weight_fp64"] = rng.standard_normal((10, 64)).astype("f8")
    f["fc.weight_fp16"] = rng.standard_normal((10, 64)).astype("f2")
    f["embedding.int8"] = rng.integers(-128, 127, (50, 8)).astype("i1")
    f["embedding.uint32"] = rng.integers(0, 2**32 - 1, (20,), dtype=np.uint64).astype("u4")
    f["vol.5d"] = rng.standard_normal((2, 3, 4, 5, 6)).astype("f4")
    f["big_endian"] = rng.standard_normal(40).astype(">f4")
    f["big_endian_i16"] = rng.integers(-1000, 1000, 40).astype(">i2")
    d = f.create_dataset("gzip.weight", data=rng.standard_normal((120, 90)).astype("f4"), chunks=(50, 40),
                         compression="gzip", compression_opts=6, shuffle=True)
    d.attrs["note"] = "chunked+gzip+shuffle"
    g = f.create_group("model_weights/dense_1/dense_1")
    g.attrs["weight_names"] = np.array([b"kernel:0", b"bias:0"])
    k = g.create_dataset("kernel:0", data=rng.standard_normal((32, 16)).astype("f4"), chunks=(8, 16), compression="gzip")
    k.attrs["units"] = 16
    g.create_dataset("bias:0", data=np.zeros(16, "f4"))
    f["model_weights"].attrs["layer_names"] = np.array([b"dense_1"])
    f.create_dataset("strings", data=np.array([b"not", b"numbers"]))  # unsupported: must be skipped, untouched
