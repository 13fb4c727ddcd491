"""ckpt-flip vs element-by-element read-modify-write through h5py (the public tool's way), same run.
Cases: contiguous fp32 and gzip-chunked (500x500) fp32, in place, N flips (default 10,000).
Env: RESIL_BENCH_SIZES_MB (default "100"; e.g. "100,1024"), RESIL_BENCH_FLIPS (10000),
RESIL_BENCH_BASELINE_FLIPS_GZIP (300: the h5py way costs ~tens of ms per flip on gzip chunks, so it is
timed on this many flips and scaled per flip to N; printed as such)."""
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

flip = sys.argv[1]
sizes = [int(s) for s in os.environ.get("RESIL_BENCH_SIZES_MB", "100").split(",")]
nflips = int(os.environ.get("RESIL_BENCH_FLIPS", "10000"))
base_gzip = int(os.environ.get("RESIL_BENCH_BASELINE_FLIPS_GZIP", "300"))


def make(path, mb, chunked):
    cols = 500 * 4 if chunked else 4096
    rows = max(500, (mb << 20) // (4 * cols) // 500 * 500)
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        kw = dict(chunks=(500, 500), compression="gzip", shuffle=True) if chunked else {}
        d = f.create_dataset("model/w", shape=(rows, cols), dtype="f4", **kw)
        step = 500
        for r in range(0, rows, step):
            d[r:r + step] = rng.standard_normal((step, cols)).astype("f4")
    return rows, cols


def h5py_way(path, shape, n):
    """Element by element: read the value, flip a bit of its float32 pattern, write it back."""
    rng = np.random.default_rng(1)
    t0 = time.perf_counter()
    with h5py.File(path, "r+") as f:
        d = f["model/w"]
        for _ in range(n):
            i, j, b = int(rng.integers(shape[0])), int(rng.integers(shape[1])), int(rng.integers(32))
            v = np.array(d[i, j], dtype="f4")
            v.view("u4")[...] ^= np.uint32(1 << b)
            d[i, j] = v
    return time.perf_counter() - t0


def ckpt_flip(path, n, log):
    t0 = time.perf_counter()
    subprocess.run([flip, "inject", path, "--in-place", "--seed", "1", "--flips", str(n), "--log", log, "--no-hash"],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


rows_out = []
with tempfile.TemporaryDirectory(prefix="bench-inject-", dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
    for mb in sizes:
        for chunked in (False, True):
            p = os.path.join(tmp, f"w{mb}{'g' if chunked else 'c'}.h5")
            shape = make(p, mb, chunked)
            fsize = os.path.getsize(p) / 2**20
            nb = min(nflips, base_gzip) if chunked else nflips
            tb = h5py_way(p, shape, nb) * nflips / nb
            tc = ckpt_flip(p, nflips, os.path.join(tmp, "log.jsonl"))
            kind = "gzip-chunked 500x500" if chunked else "contiguous"
            note = f" (h5py timed on {nb} flips, scaled)" if nb != nflips else ""
            line = (f"{mb:5d} MB {kind:22s} file {fsize:7.1f} MiB  {nflips} flips: h5py {tb:8.2f} s{note}  "
                    f"ckpt-flip {tc:6.3f} s  ratio {tb / tc:7.1f}x")
            print(line, flush=True)
            rows_out.append(line)
            os.remove(p)
