"""ckpt-flip inject per flip on checkpoints in several files against the same tensors in one file, in one
run: the same float32 tensors (RESIL_BENCH_SIZE_MB in all, tensors of 16 MiB) written as
  safetensors       one file                      | shards  4 safetensors shards with model.safetensors.index.json
  torch.save        one .pt (a state_dict)        | dcp     a torch.distributed.checkpoint directory of 4 ranks
                                                  |         (every tensor sharded by rows, each chunk a torch.save
                                                  |         archive; tests/apps/ckpt-flip/make_dcp_fixtures.py)
In TMPDIR, then in /dev/shm where it has room, each runs `ckpt-flip inject --in-place --hash none` at
N = RESIL_BENCH_FLIPS (1,000 and 100,000) flips, from a cached file, as its own process (median of
RESIL_BENCH_REPEATS, 5). The cost of a flip is the slope
(t(N_max) - t(N_min)) / (N_max - N_min), which leaves out opening the checkpoint; printed with each layout's
ratio to its one-file counterpart (shards / safetensors, dcp / torch.save; the target: at most 1.2), and the
whole runs' times.
Env: RESIL_BENCH_SIZE_MB (256), RESIL_BENCH_FLIPS ("1000,100000"), RESIL_BENCH_REPEATS (5), TMPDIR (about 4.2x
the size free; removed at the end). On ext4 the first 32 MiB of every file take a write fault per touched page,
half of a 64 MiB DCP rank file at the default size: TMPDIR=/dev/shm leaves the filesystem out, and
RESIL_BENCH_SIZE_MB=2048 gives rank files of 512 MiB (docs/results/2026-11-27-inject-sets.md).
usage: /usr/bin/python3 bench_inject_sets.py CKPT_FLIP"""
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
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "apps", "ckpt-flip"))
import make_dcp_fixtures  # noqa: E402

flip = sys.argv[1]
size_mb = int(os.environ.get("RESIL_BENCH_SIZE_MB", "256"))
flips = [int(n) for n in os.environ.get("RESIL_BENCH_FLIPS", "1000,100000").split(",")]
repeats = int(os.environ.get("RESIL_BENCH_REPEATS", "5"))
# Where the files go: TMPDIR, and /dev/shm beside it (tmpfs: no filesystem write faults) where it has room.
need = int(4.2 * size_mb) << 20
roots = [os.environ.get("TMPDIR", "/tmp")]
if os.path.isdir("/dev/shm") and os.path.realpath("/dev/shm") != os.path.realpath(roots[0]) and shutil.disk_usage("/dev/shm").free >= 2 * need:
    roots.append("/dev/shm")
if shutil.disk_usage(roots[0]).free < need:
    sys.exit(f"bench_inject_sets: {roots[0]} has {shutil.disk_usage(roots[0]).free >> 20} MiB free, {need >> 20} MiB needed (set TMPDIR)")
ROWS, COLS = 4096, 1024  # 16 MiB of float32
N_TENSORS = max(4, size_mb // 16)
SHARDS = 4


def tensors():
    rng = np.random.default_rng(0)
    return [(f"layer{i:03d}.weight", rng.standard_normal((ROWS, COLS), dtype=np.float32)) for i in range(N_TENSORS)]


def write_safetensors(path, items):
    nbytes = ROWS * COLS * 4
    header = {name: {"dtype": "F32", "shape": [ROWS, COLS], "data_offsets": [i * nbytes, (i + 1) * nbytes]}
              for i, (name, _) in enumerate(items)}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, a in items:
            f.write(a.tobytes())


def make_all(tmp):
    items = tensors()
    paths = {}
    paths["safetensors"] = os.path.join(tmp, "model.safetensors")
    write_safetensors(paths["safetensors"], items)
    d = os.path.join(tmp, "shards")
    os.makedirs(d)
    per = -(-len(items) // SHARDS)
    weight_map = {}
    for s in range(SHARDS):
        name = f"model-{s + 1:05d}-of-{SHARDS:05d}.safetensors"
        part = items[s * per:(s + 1) * per]
        write_safetensors(os.path.join(d, name), part)
        weight_map.update({n: name for n, _ in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": ROWS * COLS * 4 * len(items)}, "weight_map": weight_map}, f)
    paths["shards"] = os.path.join(d, "model.safetensors.index.json")
    paths["torch"] = os.path.join(tmp, "model.pt")
    torch.save({n: torch.from_numpy(a) for n, a in items}, paths["torch"])
    paths["dcp"] = os.path.join(tmp, "dcp")
    make_dcp_fixtures.write(paths["dcp"], "ok", [(n, torch.from_numpy(a), "sharded") for n, a in items])
    return paths


def files_of(path):
    if os.path.isdir(path):
        return [os.path.join(path, n) for n in sorted(os.listdir(path))]
    if path.endswith(".index.json"):
        d = os.path.dirname(path)
        return [os.path.join(d, n) for n in sorted(os.listdir(d))]
    return [path]


def warm(path):
    """Sync and read every file once (untimed): every run starts from cached files, no dirty pages."""
    for p in files_of(path):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        with open(p, "rb", buffering=0) as f:
            buf = bytearray(64 << 20)
            while f.readinto(buf):
                pass


def timed(path, n, seed, log):
    warm(path)
    t0 = time.perf_counter()
    subprocess.run([flip, "inject", path, "--in-place", "--hash", "none", "--seed", str(seed), "--flips", str(n), "--log", log],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def run(tmp_root):
    load = os.getloadavg()
    print(f"bench_inject_sets in {tmp_root}: {N_TENSORS} float32 tensors of 16 MiB ({N_TENSORS * 16} MiB), flips {flips}, median of "
          f"{repeats}; load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs", flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-inject-sets-", dir=tmp_root) as tmp:
        paths = make_all(tmp)
        log = os.path.join(tmp, "log.jsonl")
        # Interleaved: each round runs every layout once per N, so load changes fall on all of them alike.
        times = {(k, n): [] for k in paths for n in flips}
        for r in range(repeats):
            for n in flips:
                for k, p in paths.items():
                    times[(k, n)].append(timed(p, n, 100 * r + n % 97, log))
        for k in paths:
            t = {n: statistics.median(times[(k, n)]) for n in flips}
            slope = (t[flips[-1]] - t[flips[0]]) / (flips[-1] - flips[0])
            results[k] = {"seconds": t, "per_flip_us": slope * 1e6}
    print(f"{'layout':12s} " + " ".join(f"{n:>10d} flips" for n in flips) + "   us per flip   vs one file")
    for k, base in (("safetensors", None), ("shards", "safetensors"), ("torch", None), ("dcp", "torch")):
        r = results[k]
        ratio = f"{r['per_flip_us'] / results[base]['per_flip_us']:.2f}x {base}" if base else "-"
        print(f"{k:12s} " + " ".join(f"{r['seconds'][n]:14.3f} s" for n in flips) + f"   {r['per_flip_us']:11.2f}   {ratio}")
    print("json: " + json.dumps({"dir": tmp_root, "results": results}), flush=True)


for root in roots:
    run(root)
