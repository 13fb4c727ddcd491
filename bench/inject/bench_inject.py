"""ckpt-flip vs element-by-element read-modify-write through h5py (the public tool's way), same run.
Cases: contiguous fp32 and gzip-chunked (500x500) fp32, in place, N flips (default 10,000).
Env: RESIL_BENCH_SIZES_MB (default "100"; e.g. "100,1024"), RESIL_BENCH_FLIPS (10000),
RESIL_BENCH_CASES ("contiguous,gzip"), RESIL_BENCH_BASELINE_FLIPS_GZIP (300: the h5py way costs ~tens of ms per flip on gzip chunks, so it is
timed on this many flips and scaled per flip to N; printed as such), RESIL_BENCH_REPEATS (3: ckpt-flip
runs per case, the median is reported; each run injects N more flips into the same file).
With several sizes it also prints, per layout, ckpt-flip's time at the largest size over the smallest,
and for contiguous data (with BENCH_WORD_IO) ckpt-flip's time minus the floor at each size: what the
tool adds to the kernel's cost of the same word I/O, the "time independent of file size" check.
Files are written and flipped in slabs (never a whole dataset in memory) and fsynced before ckpt-flip
is timed, so no dirty pages of the file's creation or of the h5py run are flushed inside its time.
Needs about 2.2x the largest size free in TMPDIR (gzip file + its in-place staging copy).
usage: bench_inject.py CKPT_FLIP [BENCH_WORD_IO]: with the second, each contiguous case also prints
the kernel's floor: the same number of scattered word reads and writes with nothing else
(bench_word_io.cpp), each way after the same sync and warm-up as a ckpt-flip run."""
import os
import shutil
import statistics
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
repeats = int(os.environ.get("RESIL_BENCH_REPEATS", "3"))
tmp_root = os.environ.get("TMPDIR", "/tmp")
need = int(2.2 * max(sizes)) << 20
if shutil.disk_usage(tmp_root).free < need:
    sys.exit(f"bench_inject: {tmp_root} has {shutil.disk_usage(tmp_root).free >> 20} MiB free, "
             f"{need >> 20} MiB needed for {max(sizes)} MB (set TMPDIR)")


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
    sync(path)
    return rows, cols


def sync(path):
    """Flush the file's dirty pages now, so that ckpt-flip's own fsync is not charged for them."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def warm(path):
    """Read the whole file once (untimed) so that both ways start from a cached file: this VM
    reclaims cold page-cache pages within seconds, and a random read from disk per flip would
    measure the disk, not the tool."""
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def h5py_way(path, shape, n):
    """Element by element: read the value, flip a bit of its float32 pattern, write it back."""
    rng = np.random.default_rng(1)
    warm(path)
    t0 = time.perf_counter()
    with h5py.File(path, "r+") as f:
        d = f["model/w"]
        for _ in range(n):
            i, j, b = int(rng.integers(shape[0])), int(rng.integers(shape[1])), int(rng.integers(32))
            v = np.array(d[i, j], dtype="f4")
            v.view("u4")[...] ^= np.uint32(1 << b)
            d[i, j] = v
    t = time.perf_counter() - t0
    sync(path)
    return t


def ckpt_flip(path, n, log, extra=()):
    """Median wall time of `repeats` in-place runs (process start to exit, fsync included)."""
    times = []
    for rep in range(repeats):
        # Start from the state the h5py way starts from: no dirty page of the file, no writeback in
        # flight (a --no-sync run leaves its blocks dirty; without this the next run would be timed
        # while the kernel writes them back, and this run's writeback would not be charged at all).
        sync(path)
        warm(path)
        t0 = time.perf_counter()
        subprocess.run([flip, "inject", path, "--in-place", "--seed", str(1 + rep), "--flips", str(n), "--log", log,
                        "--no-hash", *extra], check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def word_io_floor(path, n):
    """bench_word_io's line for each way (the run with the median total of `repeats`, each run
    starting like a ckpt-flip run: synced, warm), and the median total of pread+release (the floor
    of ckpt-flip's own word I/O), or ([], None) without bench_word_io."""
    if len(sys.argv) < 3:
        return [], None
    lines, own = [], None
    for way in ("pread+pwrite", "mapping", "pread+mapping", "pread+release"):
        runs = []
        for _ in range(repeats):
            sync(path)
            warm(path)
            out = subprocess.run([sys.argv[2], path, "--words", str(n), "--way", way], check=True,
                                 capture_output=True, text=True).stdout.splitlines()
            line = [l for l in out if l.startswith("  ")][0]
            runs.append((float(line.split("total")[1].split()[0]), line))
        runs.sort()
        lines.append(runs[len(runs) // 2][1])
        if way == "pread+release":
            own = runs[len(runs) // 2][0]
    sync(path)
    return lines, own


rows_out = []
_kinds = os.environ.get("RESIL_BENCH_CASES", "contiguous,gzip").split(",")
cases = {False: "contiguous" in _kinds, True: "gzip" in _kinds}
tc_by = {}  # (chunked, mb) -> (ckpt-flip time, file MiB)
floor_by = {}  # mb -> median floor (pread+release) of the contiguous case
with tempfile.TemporaryDirectory(prefix="bench-inject-", dir=tmp_root) as tmp:
    for mb in sizes:
        for chunked in [c for c in (False, True) if cases[c]]:
            p = os.path.join(tmp, f"w{mb}{'g' if chunked else 'c'}.h5")
            shape = make(p, mb, chunked)
            fsize = os.path.getsize(p) / 2**20
            nb = min(nflips, base_gzip) if chunked else nflips
            tb = h5py_way(p, shape, nb) * nflips / nb
            tc = ckpt_flip(p, nflips, os.path.join(tmp, "log.jsonl"))
            # Like the h5py way (which never fsyncs), without the final fsync of the edited words;
            # the flip log is still fsynced before any byte changes.
            tn = ckpt_flip(p, nflips, os.path.join(tmp, "log.jsonl"), ("--no-sync",)) if not chunked else tc
            tc_by[(chunked, mb)] = (tn, fsize)
            kind = "gzip-chunked 500x500" if chunked else "contiguous"
            note = f" (h5py timed on {nb} flips, scaled)" if nb != nflips else ""
            if repeats > 1:
                note += f" (ckpt-flip median of {repeats})"
            line = (f"{mb:5d} MB {kind:22s} file {fsize:7.1f} MiB  {nflips} flips: h5py {tb:8.2f} s{note}  "
                    f"ckpt-flip {tc:6.3f} s  ratio {tb / tc:7.1f}x"
                    + ("" if chunked else f"  | --no-sync {tn:6.3f} s  ratio {tb / tn:7.1f}x"))
            print(line, flush=True)
            rows_out.append(line)
            if not chunked:
                floor, floor_by[mb] = word_io_floor(p, nflips)
                if floor:
                    print(f"      kernel floor, {nflips} scattered words alone (bench_word_io, median of {repeats}):", flush=True)
                    for l in floor:
                        print("    " + l, flush=True)
            os.remove(p)

if len(set(sizes)) > 1:
    lo, hi = min(sizes), max(sizes)
    for chunked, kind, why in ((False, "contiguous", "time independent of file size: expected ~1"),
                               (True, "gzip-chunked 500x500", "in place it is staged through a copy of the file: grows with it")):
        if not cases[chunked]:
            continue
        (t_hi, f_hi), (t_lo, f_lo) = tc_by[(chunked, hi)], tc_by[(chunked, lo)]
        print(f"{kind}: ckpt-flip {hi} MB / {lo} MB time = {t_hi / t_lo:.2f} "
              f"({t_hi:.3f} s / {t_lo:.3f} s, files {f_hi:.1f} / {f_lo:.1f} MiB; {why})", flush=True)
        if not chunked and floor_by.get(hi) is not None and floor_by.get(lo) is not None:
            # What ckpt-flip adds to the page cache's cost of the same word I/O (bench_word_io
            # pread+release): start, HDF5, sampling, planning, the fsynced log. It should not grow
            # with the file; the floor may (the kernel's cost per touched page-cache folio).
            a_hi, a_lo = t_hi - floor_by[hi], t_lo - floor_by[lo]
            print(f"{kind}: ckpt-flip --no-sync minus the floor (pread+release) = {a_lo * 1e3:.1f} ms at {lo} MB, "
                  f"{a_hi * 1e3:.1f} ms at {hi} MB (ratio {a_hi / a_lo:.2f}, expected ~1); the floor: "
                  f"{floor_by[lo] * 1e3:.1f} -> {floor_by[hi] * 1e3:.1f} ms ({floor_by[hi] / floor_by[lo]:.2f}x)", flush=True)
