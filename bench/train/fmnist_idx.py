"""Fashion-MNIST IDX files (plain or .gz) for the training benchmarks."""
import gzip
import os
import sys

import numpy as np


def idx(path):
    with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


def find(data, stem, who):
    for s in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(data, s)):
            return os.path.join(data, s)
    sys.exit(f"{who}: {stem} not found under {data}")
