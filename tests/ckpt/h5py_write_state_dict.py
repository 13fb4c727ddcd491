"""Write a PyTorch-style state_dict with h5py, as a user of another framework would.

usage: h5py_write_state_dict.py OUT.h5
Layout: /model/<name> datasets (contiguous and chunked+gzip+shuffle), fp32/fp16/fp64/int64,
a 5-D tensor, a Keras-style nested group, and attributes. Values are a deterministic function of
the index so the C++ side can check them without a copy.
"""
import sys

import h5py
import numpy as np

out = sys.argv[1]
with h5py.File(out, "w") as f:
    f.attrs["framework"] = "pytorch"
    f.create_dataset("/model/fc1.weight", data=np.arange(12, dtype=np.float32).reshape(3, 4) * 0.25)
    f.create_dataset("/model/fc1.bias", data=np.arange(3, dtype=np.float32) - 1.0,
                     chunks=(2,), compression="gzip", compression_opts=4, shuffle=True)
    f.create_dataset("/model/conv.weight", data=np.arange(2 * 3 * 2 * 2 * 2, dtype=np.float64).reshape(2, 3, 2, 2, 2),
                     chunks=(1, 3, 2, 2, 2), compression="gzip")
    f.create_dataset("/model/half", data=np.array([1.0, -2.0, 0.5], dtype=np.float16))
    f.create_dataset("/model/bn.num_batches_tracked", data=np.int64(17))
    g = f.create_group("/model_weights/dense/dense")
    g.create_dataset("kernel:0", data=np.ones((2, 2), dtype=np.float32))
