#!/usr/bin/python3
"""kill -9 during `ckpt-flip inject --in-place`, then `ckpt-flip revert`, on chunked data.

  ckpt-flip_kill9.py CKPT_FLIP

Complements the contiguous + gzip sweep of ckpt-flip_cli.sh with the states a kill can leave, on a
file with the default superblock (version 0) and on one written with h5py libver="latest"
(superblock version 3, where an HDF5 read-write open records "open for write" in the superblock
and a kill leaves the file unopenable: ckpt-flip must never open it read-write in place):

* in place (HDF5 opened read-only; words of contiguous data and of allocated unfiltered chunks,
  edge chunks included, changed at their file offsets; the partially written dataset excluded;
  latest.h5's contiguous model/c gets ~20,000 flips over 4 MB, which ckpt-flip stores in two
  processes, itself and a forked child that must die with it): after a
  kill the file must still open and read, every touched word must be either its old or its new
  value (a mix is allowed: that is what a kill mid-apply leaves), untouched words unchanged, and
  revert must give back a file byte-identical to the original. At least one kill must land
  mid-apply (some words applied, some not).
* staged (flips in chunks never written, which only HDF5 can allocate, or in gzip chunks: the
  file goes through a temporary sibling + atomic rename): after a kill the file is byte-identical
  either to the original or to the uninterrupted run's output; revert restores every dataset (the
  bytes too unless chunks were allocated or a compressed chunk rewritten).
* the uninterrupted run changed exactly the logged words, from old to new bits; also on a file with
  a user block (in place and -o).
* a kill before the log is complete (it is fsynced before the first byte of the file changes)
  leaves the file byte-identical to the original.
* a killed staged run leaves its temporary sibling (.NAME.tmp.PID); the next in-place run
  (here: revert) removes it, one line each, and leaves temporaries of live processes alone.

Kill points: one uninterrupted run per file measures when the log is complete (its last record is
in it) and how long the apply phase lasts; killed runs are then signalled at fractions of that
phase after their own log is complete, so the points track the machine's speed.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

FLIP = sys.argv[1]
FLIPS = 40000
SEED = 4


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


def make_files(d):
    rng = np.random.default_rng(1)
    u = os.path.join(d, "chunked.h5")
    with h5py.File(u, "w") as f:
        # 2010 x 1990 over 25 x 40 chunks: the last chunk row and column are edge chunks (stored full-size).
        f.create_dataset("model/u", data=rng.standard_normal((2010, 1990)).astype("f4"), chunks=(25, 40))
        s = f.create_dataset("model/s", shape=(400, 400), dtype="f8", chunks=(20, 20), fillvalue=0.0)
        s[:200] = rng.standard_normal((200, 400))  # rows 200.. stay unallocated chunks
    n = os.path.join(d, "latest.h5")
    with h5py.File(n, "w", libver="latest") as f:
        f.create_dataset("model/c", data=rng.standard_normal((1000, 1000)).astype("f4"))  # contiguous
        f.create_dataset("model/u", data=rng.standard_normal((1010, 990)).astype("f4"), chunks=(25, 40))
        f.create_dataset("model/b", data=rng.standard_normal((30, 17, 11)).astype(">f8"), chunks=(8, 5, 4))
        s = f.create_dataset("model/s", shape=(400, 400), dtype="f8", chunks=(20, 20), fillvalue=0.0)
        s[:200] = rng.standard_normal((200, 400))
    with open(n, "rb") as f:
        if f.read(9)[8] < 2:
            fail(f"{n}: libver=latest did not give superblock version 2/3")
    g = os.path.join(d, "gzip.h5")
    with h5py.File(g, "w") as f:
        f.create_dataset("model/g", data=rng.standard_normal((1500, 1500)).astype("f4"), chunks=(100, 100),
                         compression="gzip", shuffle=True)
    return u, n, g


def words(path):
    """Raw stored words of every dataset (bit patterns, so NaN compares exactly)."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                a = obj[...]
                u = np.dtype(f"u{a.dtype.itemsize}")
                if a.dtype.byteorder in "<>":  # stored word values, whatever the byte order
                    u = u.newbyteorder(a.dtype.byteorder)
                out[name] = a.view(u).astype(f"u{a.dtype.itemsize}")
        f.visititems(visit)
    return out


def log_complete(log):
    """True once the last planned record is in the log (written and fsynced before the file changes)."""
    want = f'"seq":{FLIPS - 1},'.encode()
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            return want in f.read()
    except FileNotFoundError:
        return False


def survivors(path):
    """Pids of live (not zombie) processes whose command line names `path`."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if path.encode() in cmd and state != "Z":
            out.append(int(pid))
    return out


def run_inject(path, log, args, stop=None):
    """Start an in-place injection and SIGKILL it as soon as stop(now, t_log) is true (times in s from
    the start; t_log: when its log was complete, or None). Without `stop` it runs to the end.
    Returns (t_log, t_end)."""
    if os.path.exists(log):
        os.remove(log)
    t0 = time.perf_counter()
    p = subprocess.Popen([FLIP, "inject", path, "--in-place", "--seed", str(SEED), "--flips", str(FLIPS),
                          "--log", log, "--no-hash", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t_log = None
    while p.poll() is None:
        now = time.perf_counter() - t0
        if t_log is None and log_complete(log):
            t_log = now
        if stop is not None and stop(now, t_log):
            break
        time.sleep(0.0005)
    if stop is None:
        err = p.stderr.read().decode()
        if p.wait() != 0:
            fail(f"uninterrupted inject exited {p.returncode}: {err}")
    else:
        p.send_signal(signal.SIGKILL)  # if it just finished this is a no-op: still a valid kill point
        p.wait()
        # Nothing of the injection may keep running (the child that stores half of the words is
        # killed with it): a process still writing would race the revert that follows. A child
        # left alive would finish its half within milliseconds anyway, so this catches a hung one.
        deadline = time.perf_counter() + 2
        while survivors(path) and time.perf_counter() < deadline:
            time.sleep(0.01)
        if survivors(path):
            fail(f"processes of a killed injection of {path} still run: {survivors(path)}")
    t_end = time.perf_counter() - t0
    if t_log is None and log_complete(log):
        t_log = t_end
    return t_log, t_end


def check_log(orig, ref, log, what):
    """The uninterrupted run changed exactly the logged elements, from the logged old to the logged new
    bits (the log's old bits come from reading through HDF5, the in-place writes do not)."""
    want = {n: a.copy() for n, a in orig.items()}
    with open(log) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") != "flip":
                continue
            a, nd = want[r["dataset"].lstrip("/")], tuple(r["nd"])
            if int(a[nd]) != int(r["old"], 16):
                fail(f"{what}: {r['dataset']}{list(nd)}: file has {int(a[nd]):#x}, the log's old bits are {r['old']}")
            a[nd] = int(r["new"], 16)
    for n, a in want.items():
        bad = np.count_nonzero(a != ref[n])
        if bad:
            fail(f"{what}: /{n}: {bad} word(s) differ from what the log says was written")


def flip_cmd(*args):
    p = subprocess.run([FLIP, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def classify(orig, ref, after, what):
    """Per dataset: touched words are old or new (never anything else), untouched words unchanged.
    Returns (applied, not_applied) over all touched words."""
    applied = pending = 0
    for name, o in orig.items():
        r, a = ref[name], after[name]
        touched = o != r
        if np.any(a[~touched] != o[~touched]):
            fail(f"{what}: /{name}: an untouched word changed")
        at, ot, rt = a[touched], o[touched], r[touched]
        other = np.count_nonzero((at != ot) & (at != rt))
        if other:
            fail(f"{what}: /{name}: {other} touched word(s) are neither old nor new")
        applied += int(np.count_nonzero(at == rt))
        pending += int(np.count_nonzero(at == ot))
    return applied, pending


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def staging_files(d, name):
    return [t for t in os.listdir(d) if t.startswith(("." + name + ".tmp", name + ".tmp"))]


def chunks_allocated(path):
    with h5py.File(path, "r") as f:
        return {n: f[n].id.get_num_chunks() for n in ("model/u", "model/s", "model/g", "model/b") if n in f}


def revert_and_reap(k, log, what, leftovers):
    """revert must succeed, remove every staging leftover of a dead process (one line each) and
    keep temporaries of live processes and names that are not temporaries."""
    d, name = os.path.split(k)
    live = os.path.join(d, f".{name}.tmp.{os.getpid()}")  # this script's pid: alive
    odd = os.path.join(d, f".{name}.tmp.12x")
    for p in (live, odd):
        with open(p, "wb") as f:
            f.write(b"x")
    rc, out = flip_cmd("revert", k, "--log", log)
    if rc != 0:
        fail(f"{what}: revert exited {rc}: {out}")
    for t in leftovers:
        if f"removed stale temporary {os.path.join(d, t)} " not in out:
            fail(f"{what}: revert did not report removing the stale {t}: {out}")
    if len([ln for ln in out.splitlines() if ln.startswith("removed stale temporary")]) != len(leftovers):
        fail(f"{what}: revert reported other removals than {leftovers}: {out}")
    for p in (live, odd):
        if not os.path.exists(p):
            fail(f"{what}: revert removed {os.path.basename(p)}, which is not a dead process's temporary")
        os.remove(p)
    if staging_files(d, name):
        fail(f"{what}: staging leftovers after revert: {staging_files(d, name)}")


def sweep(kind, orig_path, d, fractions, args=(), staged=False, after_rename=False):
    """Calibrate on one uninterrupted run, then kill at each fraction of its apply phase (and, with
    after_rename, as soon as the staged copy has been renamed onto the file). `staged`: the
    injection must go through a staged copy (file = original or finished output after a kill);
    otherwise it must be in place (no staged copy; revert byte-identical)."""
    ref_path = os.path.join(d, f"{kind}.ref.h5")
    shutil.copyfile(orig_path, ref_path)
    t_log, t_end = run_inject(ref_path, os.path.join(d, f"{kind}.ref.jsonl"), args)
    apply_s = max(t_end - t_log, 0.001)
    print(f"{kind}: uninterrupted: log complete after {t_log * 1e3:.0f} ms, apply phase {apply_s * 1e3:.0f} ms",
          flush=True)
    orig, ref = words(orig_path), words(ref_path)
    check_log(orig, ref, os.path.join(d, f"{kind}.ref.jsonl"), f"{kind} uninterrupted")
    total = sum(int(np.count_nonzero(orig[n] != ref[n])) for n in orig)
    orig_chunks = chunks_allocated(orig_path)

    k, log = os.path.join(d, f"{kind}.k.h5"), os.path.join(d, f"{kind}.k.jsonl")
    seen = []

    def renamed(_now, _t_log):  # the staged copy appeared and is gone again: renamed onto the file
        if staging_files(d, f"{kind}.k.h5"):
            seen.append(True)
            return False
        return bool(seen)

    mtime0, first_write = [0], []

    def written(delay):  # in place: the file's mtime moved (its first pwrite), then `delay` s more
        def stop(now, _t_log):
            if not first_write and os.stat(k).st_mtime_ns != mtime0[0]:
                first_write.append(now)
            return bool(first_write) and now >= first_write[0] + delay
        return stop

    points = [("start+50% of log", lambda now, _t: now >= 0.5 * t_log)]
    points += [(f"log+{f:.2f}*apply", lambda now, tl, f=f: tl is not None and now >= tl + f * apply_s)
               for f in fractions]
    if not staged:
        # The writes come last and quickly (after the chunk lookups): aim at them too.
        points += [(f"first write+{ms}ms", written(ms / 1000)) for ms in (0, 2, 10)]
    if after_rename:
        points.append(("staged copy renamed", renamed))
    states = []
    for label, stop in points:
        shutil.copyfile(orig_path, k)
        mtime0[0] = os.stat(k).st_mtime_ns
        seen.clear()
        first_write.clear()
        run_inject(k, log, args, stop)
        what = f"{kind} kill at {label}"
        leftovers = staging_files(d, f"{kind}.k.h5")
        footer = os.path.exists(log) and b'"type":"footer"' in open(log, "rb").read()
        if not log_complete(log):
            if not same_bytes(orig_path, k):
                fail(f"{what}: log incomplete but the file changed")
            print(f"  {what}: log incomplete -> file byte-identical to the original", flush=True)
            states.append("before-apply")
            continue
        try:
            after = words(k)
        except Exception as e:  # noqa: BLE001 - any failure to read is the finding
            fail(f"{what}: file unreadable after the kill: {e}")
        applied, pending = classify(orig, ref, after, what)
        staged_state = ""
        if staged:
            if same_bytes(orig_path, k):
                staged_state = "; file = original"
            elif same_bytes(ref_path, k):
                staged_state = "; file = finished output"
            else:
                fail(f"{what}: staged file neither the original nor the finished output (applied {applied}/{total})")
        elif leftovers:
            fail(f"{what}: an in-place run left a staged copy: {leftovers}")
        state = "none" if applied == 0 else "all" if pending == 0 else "partial"
        states.append(state)
        revert_and_reap(k, log, what, leftovers)
        rc, out = flip_cmd("diff", orig_path, k)
        if rc != 0 or "identical" not in out:
            fail(f"{what}: revert not exact: {out}")
        # In place: the bytes too (HDF5 never wrote). Staged unfiltered: bytes too, unless flips landed in
        # never-written chunks and their allocation reached the disk. gzip: a rewritten compressed chunk
        # may move (docs/design/ckpt-flip-io.md), datasets only.
        allocated = chunks_allocated(k) != orig_chunks
        exact = same_bytes(orig_path, k)
        if not staged and not exact:
            fail(f"{what}: in-place run reverted: datasets identical but file bytes differ")
        if kind != "gzip" and not exact and not allocated:
            fail(f"{what}: reverted datasets identical but file bytes differ with no chunk allocated")
        print(f"  {what}: log complete, footer {'yes' if footer else 'no'}; {applied}/{total} touched words applied "
              f"({state}){staged_state}; none corrupt; revert -> datasets identical, file bytes "
              f"{'identical' if exact else 'differ (chunks allocated)' if allocated else 'differ (chunks rewritten)'}"
              f"{'; staging leftover ' + ','.join(leftovers) if leftovers else ''}", flush=True)
    return states


def userblock_check(d):
    """A file with a user block: HDF5 addresses are relative to it (H5Dget_offset is absolute, chunk
    addresses are not in HDF5 1.10): in place and -o must change exactly the logged words."""
    rng = np.random.default_rng(2)
    ub = os.path.join(d, "userblock.h5")
    with h5py.File(ub, "w", userblock_size=1024) as f:
        f.create_dataset("model/c", data=rng.standard_normal((300, 200)).astype("f4"))
        f.create_dataset("model/u", data=rng.standard_normal((310, 190)).astype("f8"), chunks=(25, 40))
    orig = words(ub)
    for how in ("in place", "-o"):
        k, log = os.path.join(d, "userblock.k.h5"), os.path.join(d, "userblock.jsonl")
        shutil.copyfile(ub, k)
        out = ["--in-place"] if how == "in place" else ["-o", k + ".out"]
        rc, msg = flip_cmd("inject", k, *out, "--seed", "5", "--flips", "3000", "--log", log, "--no-hash")
        if rc != 0:
            fail(f"userblock {how}: inject exited {rc}: {msg}")
        res = k if how == "in place" else k + ".out"
        check_log(orig, words(res), log, f"userblock {how}")
        rc, msg = flip_cmd("revert", res, "--log", log)
        if rc != 0 or not same_bytes(ub, res):
            fail(f"userblock {how}: revert exited {rc} or is not byte-identical: {msg}")
        for p in (k, k + ".out"):
            if os.path.exists(p):
                os.remove(p)
    print("userblock: in place and -o change exactly the logged words; revert byte-identical", flush=True)


def in_place_sweep(kind, path, d, args):
    fr = [0.05, 0.25, 0.45, 0.6, 0.7, 0.8, 0.9]
    st = sweep(kind, path, d, fr, args)
    if "partial" not in st:
        # Loaded machine: the first sweep's points may all have missed the apply phase; one more.
        st += sweep(kind, path, d, [f + 0.1 for f in fr[:-1]], args)
    if "partial" not in st:
        fail(f"{kind}: no kill landed mid-apply (some words applied, some not)")
    return st


def main():
    with tempfile.TemporaryDirectory(prefix="ckpt-flip-kill9-") as d:
        u, n, g = make_files(d)
        userblock_check(d)
        in_place = ["--exclude", "/model/s"]  # no flip in a never-written chunk: nothing to stage
        states = {
            "chunked": in_place_sweep("chunked", u, d, in_place),
            "chunked-alloc": sweep("chunked-alloc", u, d, [0.3, 0.9], staged=True, after_rename=True),
            "latest": in_place_sweep("latest", n, d, in_place),
            "latest-alloc": sweep("latest-alloc", n, d, [0.3, 0.6, 0.9], staged=True, after_rename=True),
            "gzip": sweep("gzip", g, d, [0.3, 0.6, 0.9], staged=True, after_rename=True),
        }
        for kind, st in states.items():
            print(f"{kind} kill states: {' '.join(st)}")
        if "none" not in states["gzip"]:
            fail("gzip: no kill landed after the log was complete and before the rename")
    print("ckpt-flip kill -9 chunked OK")


main()
