"""Read a checkpoint written by resil with plain h5py and check every documented field.

usage: h5py_check_resil.py CKPT.h5   (exit 0 when everything matches)
"""
import sys

import h5py
import numpy as np

with h5py.File(sys.argv[1], "r") as f:
    w = f["/model/fc1.weight"][...]
    assert w.dtype == np.float32 and w.shape == (3, 4), (w.dtype, w.shape)
    assert np.array_equal(w, np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5), w
    h = f["/model/half"][...]
    assert h.dtype == np.float16 and list(h) == [1.0, -2.0, 0.5], h
    bf = f["/model/bf"]
    assert bf.dtype == np.uint16 and bf.attrs["resil_dtype"] == "bf16"
    as_f32 = (bf[...].astype(np.uint32) << 16).view(np.float32)
    assert list(as_f32) == [1.0, -2.5], as_f32
    five = f["/model/five"][...]
    assert five.shape == (1, 2, 1, 2, 3) and five.dtype == np.int32
    assert np.array_equal(five.reshape(-1), np.arange(12, dtype=np.int32))
    m = f["/optimizer/fc1.weight/momentum"][...]
    assert np.array_equal(m, np.zeros((3, 4), dtype=np.float32))
    meta = f["/meta"].attrs
    assert meta["step"] == 5 and meta["epoch"] == 1 and meta["world_size"] == 1
    assert meta["mode"] == "none", meta["mode"]
    assert meta["model"] == "mlp"
    assert list(f["/meta/rng_state"][...]) == [11, 22]
    assert "resil_xxh64" in f["/model/fc1.weight"].attrs
print("h5py read the resil checkpoint correctly")
