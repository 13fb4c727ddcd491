"""Default `ckpt-flip inject --in-place` (sample-sha256 file identity) vs `--no-hash` vs `--hash sha256`, and
the two Python ways a user would take without ckpt-flip, in one run, on 1 GiB files:
  torch.save .pt      : ckpt-flip, and a script doing torch.load, flip N bits, torch.save (same path)
  safetensors         : ckpt-flip, and a script doing numpy.memmap of the data (r+), XOR N words, flush
at N = 1, 100, 10,000 flips (single bits in float32 words). Every way runs as its own process, timed from
start to exit; before each run the file is synced and read once (untimed), so every way starts from a cached
file with no dirty pages. ckpt-flip runs are the median of RESIL_BENCH_REPEATS (5), the Python ways of
RESIL_BENCH_PY_REPEATS (3). Printed per row: each time, default / --no-hash (the target: at most 1.5), and
the Python ways / default. Also printed: a whole read of the file from the page cache by Python and, with
BENCH_FILE_HASH, each identity hash alone on the file
(bench_file_hash.cpp: sample-sha256, and XXH64 and SHA-256 of every byte).
Env: RESIL_BENCH_SIZE_MB (1024), RESIL_BENCH_FLIPS ("1,100,10000"), RESIL_BENCH_FORMATS ("torch,safetensors"),
RESIL_BENCH_REPEATS, RESIL_BENCH_PY_REPEATS, TMPDIR (needs about 2.1x the size free; files are removed).
usage: /usr/bin/python3 bench_inject_hash.py CKPT_FLIP [BENCH_FILE_HASH]"""
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

flip = sys.argv[1]
size_mb = int(os.environ.get("RESIL_BENCH_SIZE_MB", "1024"))
flips = [int(n) for n in os.environ.get("RESIL_BENCH_FLIPS", "1,100,10000").split(",")]
formats = os.environ.get("RESIL_BENCH_FORMATS", "torch,safetensors").split(",")
repeats = int(os.environ.get("RESIL_BENCH_REPEATS", "5"))
py_repeats = int(os.environ.get("RESIL_BENCH_PY_REPEATS", "3"))
tmp_root = os.environ.get("TMPDIR", "/tmp")
need = int(2.1 * size_mb) << 20
if shutil.disk_usage(tmp_root).free < need:
    sys.exit(f"bench_inject_hash: {tmp_root} has {shutil.disk_usage(tmp_root).free >> 20} MiB free, {need >> 20} MiB needed (set TMPDIR)")
TENSOR_MB = 16  # the file is size_mb / 16 float32 tensors of 16 MiB (4096 x 1024)
ROWS, COLS = 4096, 1024

TORCH_WAY = r"""
import sys, torch
path, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
g = torch.Generator().manual_seed(seed)
sd = torch.load(path)
flat = [sd[k].view(-1).view(torch.int32) for k in sorted(sd)]
ts = torch.randint(len(flat), (n,), generator=g).tolist()
us = torch.rand(n, generator=g, dtype=torch.float64).tolist()
bs = torch.randint(32, (n,), generator=g).tolist()
for t, u, b in zip(ts, us, bs):
    w = flat[t]
    w[int(u * w.numel())] ^= (1 << b) if b < 31 else -(1 << 31)
torch.save(sd, path)
"""

MEMMAP_WAY = r"""
import json, struct, sys
import numpy as np
path, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(seed)
with open(path, "rb") as f:
    hlen = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(hlen))
spans = np.array([v["data_offsets"] for k, v in sorted(header.items()) if k != "__metadata__"], dtype=np.int64) // 4
words = np.memmap(path, dtype="<u4", mode="r+", offset=8 + hlen)
which = rng.integers(len(spans), size=n)
idx = spans[which, 0] + (rng.random(n) * (spans[which, 1] - spans[which, 0])).astype(np.int64)
np.bitwise_xor.at(words, idx, np.uint32(1) << rng.integers(32, size=n).astype(np.uint32))  # repeats apply in turn
words.flush()
del words
"""


def sync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def warm(path):
    """Read the whole file once (untimed): every way starts from a cached file."""
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(64 << 20)
        while f.readinto(buf):
            pass
    return time.perf_counter() - t0


def make_torch(path):
    import torch
    g = torch.Generator().manual_seed(0)
    sd = {f"layer{i:03d}.weight": torch.randn(ROWS, COLS, generator=g) for i in range(size_mb // TENSOR_MB)}
    torch.save(sd, path)
    del sd
    sync(path)


def make_safetensors(path):
    n = size_mb // TENSOR_MB
    nbytes = ROWS * COLS * 4
    header = {f"layer{i:03d}.weight": {"dtype": "F32", "shape": [ROWS, COLS], "data_offsets": [i * nbytes, (i + 1) * nbytes]}
              for i in range(n)}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _ in range(n):
            f.write(rng.standard_normal((ROWS, COLS), dtype=np.float32).tobytes())
    sync(path)


def timed(cmd, path):
    sync(path)
    warm(path)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    t = time.perf_counter() - t0
    sync(path)  # a way's own writeback is not charged to the next
    return t


def median_of(k, cmd_of, path):
    return statistics.median(timed(cmd_of(r), path) for r in range(k))


load = os.getloadavg()
print(f"bench_inject_hash: {size_mb} MiB files, flips {flips}, ckpt-flip median of {repeats}, Python ways median of "
      f"{py_repeats}; load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs", flush=True)
rows = []
with tempfile.TemporaryDirectory(prefix="bench-inject-hash-", dir=tmp_root) as tmp:
    log = os.path.join(tmp, "log.jsonl")
    for fmt in formats:
        path = os.path.join(tmp, "model.pt" if fmt == "torch" else "model.safetensors")
        (make_torch if fmt == "torch" else make_safetensors)(path)
        mib = os.path.getsize(path) / 2**20
        reads = sorted(warm(path) for _ in range(3))
        print(f"{fmt}: file {mib:.1f} MiB; one whole read from the page cache by Python (readinto, 64 MiB buffer): "
              f"{reads[1] * 1e3:.0f} ms (median of 3)", flush=True)
        if len(sys.argv) > 2:
            print("  " + subprocess.run([sys.argv[2], path, "9"], check=True, capture_output=True, text=True).stdout.strip(), flush=True)
        py_way = TORCH_WAY if fmt == "torch" else MEMMAP_WAY
        py_name = "torch.load/save" if fmt == "torch" else "numpy.memmap XOR"
        for n in flips:
            def cf(*extra):
                return lambda r: [flip, "inject", path, "--in-place", "--seed", str(100 + r), "--flips", str(n), "--log", log, *extra]
            t_def = median_of(repeats, cf(), path)
            t_none = median_of(repeats, cf("--no-hash"), path)
            t_sha = median_of(max(1, repeats // 2), cf("--hash", "sha256"), path)
            t_py = median_of(py_repeats, lambda r: ["/usr/bin/python3", "-c", py_way, path, str(n), str(r)], path)
            row = dict(format=fmt, flips=n, default=t_def, no_hash=t_none, sha256=t_sha, python=t_py, python_way=py_name)
            rows.append(row)
            print(f"{fmt:11s} {n:6d} flips: default {t_def * 1e3:8.1f} ms  --no-hash {t_none * 1e3:8.1f} ms  "
                  f"--hash sha256 {t_sha * 1e3:8.1f} ms  {py_name} {t_py * 1e3:8.1f} ms  | default/--no-hash "
                  f"{t_def / t_none:5.2f}  sha256/--no-hash {t_sha / t_none:6.2f}  {py_name}/default {t_py / t_def:7.1f}x  "
                  f"{py_name}/sha256 {t_py / t_sha:6.1f}x", flush=True)
        os.remove(path)
worst = max(r["default"] / r["no_hash"] for r in rows)
print(f"worst default/--no-hash: {worst:.2f} (target <= 1.5)", flush=True)
load = os.getloadavg()
print(f"load average at end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
print("json: " + json.dumps(rows))
