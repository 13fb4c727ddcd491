#!/usr/bin/python3
"""kill -9 during `ckpt-flip inject --in-place`, then `ckpt-flip revert`, on chunked data.

  ckpt-flip_kill9.py CKPT_FLIP

Complements the contiguous + gzip sweep of ckpt-flip_cli.sh with the states a kill can leave:

* unfiltered chunked (chunks rewritten in place through HDF5, no staging copy; one dataset fully
  allocated, one with half of its chunks never written, so flips there allocate chunks): after a kill
  the file must still open and read, every touched word must be either its old or its new value
  (a mix is allowed: that is what a kill mid-apply leaves), untouched words unchanged, and revert
  must give back a file that is byte-identical to the original (dataset-identical where the kill or
  the run allocated chunks). At least one kill must land mid-apply (some words applied, some not).
* gzip-chunked (staged through a temporary sibling + atomic rename): after a kill the file is
  byte-identical either to the original or to the uninterrupted run's output; revert restores it.
* a kill before the log is complete (it is fsynced before the first byte of the file changes)
  leaves the file byte-identical to the original.

Kill points: one uninterrupted run per file measures when the log is complete (its last record is
in it) and how long the apply phase lasts; killed runs are then signalled at fractions of that
phase after their own log is complete, so the points track the machine's speed.
"""
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
    u = os.path.join(d, "uncompressed.h5")
    with h5py.File(u, "w") as f:
        f.create_dataset("model/u", data=rng.standard_normal((2000, 2000)).astype("f4"), chunks=(25, 25))
        s = f.create_dataset("model/s", shape=(400, 400), dtype="f8", chunks=(20, 20), fillvalue=0.0)
        s[:200] = rng.standard_normal((200, 400))  # rows 200.. stay unallocated chunks
    g = os.path.join(d, "gzip.h5")
    with h5py.File(g, "w") as f:
        f.create_dataset("model/g", data=rng.standard_normal((1500, 1500)).astype("f4"), chunks=(100, 100),
                         compression="gzip", shuffle=True)
    return u, g


def words(path):
    """Raw stored words of every dataset (bit patterns, so NaN compares exactly)."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                a = obj[...]
                out[name] = a.view(f"u{a.dtype.itemsize}")
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


def run_inject(path, log, stop=None):
    """Start an in-place injection and SIGKILL it as soon as stop(now, t_log) is true (times in s from
    the start; t_log: when its log was complete, or None). Without `stop` it runs to the end.
    Returns (t_log, t_end)."""
    if os.path.exists(log):
        os.remove(log)
    t0 = time.perf_counter()
    p = subprocess.Popen([FLIP, "inject", path, "--in-place", "--seed", str(SEED), "--flips", str(FLIPS),
                          "--log", log, "--no-hash"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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
    t_end = time.perf_counter() - t0
    if t_log is None and log_complete(log):
        t_log = t_end
    return t_log, t_end


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
        return {n: f[n].id.get_num_chunks() for n in ("model/u", "model/s", "model/g") if n in f}


def sweep(kind, orig_path, d, fractions, after_rename=False):
    """Calibrate on one uninterrupted run, then kill at each fraction of its apply phase (and, with
    after_rename, as soon as the staged copy has been renamed onto the file)."""
    ref_path = os.path.join(d, f"{kind}.ref.h5")
    shutil.copyfile(orig_path, ref_path)
    t_log, t_end = run_inject(ref_path, os.path.join(d, f"{kind}.ref.jsonl"))
    apply_s = max(t_end - t_log, 0.001)
    print(f"{kind}: uninterrupted: log complete after {t_log * 1e3:.0f} ms, apply phase {apply_s * 1e3:.0f} ms",
          flush=True)
    orig, ref = words(orig_path), words(ref_path)
    total = sum(int(np.count_nonzero(orig[n] != ref[n])) for n in orig)
    orig_chunks = chunks_allocated(orig_path)

    k, log = os.path.join(d, f"{kind}.k.h5"), os.path.join(d, f"{kind}.k.jsonl")
    seen = []

    def renamed(_now, _t_log):  # the staged copy appeared and is gone again: renamed onto the file
        if staging_files(d, f"{kind}.k.h5"):
            seen.append(True)
            return False
        return bool(seen)

    points = [("start+50% of log", lambda now, _t: now >= 0.5 * t_log)]
    points += [(f"log+{f:.2f}*apply", lambda now, tl, f=f: tl is not None and now >= tl + f * apply_s)
               for f in fractions]
    if after_rename:
        points.append(("staged copy renamed", renamed))
    states = []
    for label, stop in points:
        shutil.copyfile(orig_path, k)
        for t in staging_files(d, f"{kind}.k.h5"):
            os.remove(os.path.join(d, t))  # leftovers of the previous kill
        seen.clear()
        run_inject(k, log, stop)
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
        staged = ""
        if kind == "gzip":
            if same_bytes(orig_path, k):
                staged = "; file = original"
            elif same_bytes(ref_path, k):
                staged = "; file = finished output"
            else:
                fail(f"{what}: staged file neither the original nor the finished output (applied {applied}/{total})")
        state = "none" if applied == 0 else "all" if pending == 0 else "partial"
        states.append(state)
        rc, out = flip_cmd("revert", k, "--log", log)
        if rc != 0:
            fail(f"{what}: revert exited {rc}: {out}")
        rc, out = flip_cmd("diff", orig_path, k)
        if rc != 0 or "identical" not in out:
            fail(f"{what}: revert not exact: {out}")
        # Unfiltered: bytes too, unless flips landed in never-written chunks and their allocation reached
        # the disk. gzip: a rewritten compressed chunk may move (docs/ckpt-flip.md), datasets only.
        allocated = chunks_allocated(k) != orig_chunks
        exact = same_bytes(orig_path, k)
        if kind == "uncompressed" and not exact and not allocated:
            fail(f"{what}: reverted datasets identical but file bytes differ with no chunk allocated")
        print(f"  {what}: log complete, footer {'yes' if footer else 'no'}; {applied}/{total} touched words applied "
              f"({state}){staged}; none corrupt; revert -> datasets identical, file bytes "
              f"{'identical' if exact else 'differ (chunks allocated)' if allocated else 'differ (chunks rewritten)'}"
              f"{'; staging leftover ' + ','.join(leftovers) if leftovers else ''}", flush=True)
    return states


def main():
    with tempfile.TemporaryDirectory(prefix="ckpt-flip-kill9-") as d:
        u, g = make_files(d)
        fr = [0.05, 0.25, 0.45, 0.6, 0.7, 0.8, 0.9]
        st = sweep("uncompressed", u, d, fr)
        if "partial" not in st:
            # Loaded machine: the first sweep's points may all have missed the apply phase; one more.
            st += sweep("uncompressed", u, d, [f + 0.1 for f in fr[:-1]])
        if "partial" not in st:
            fail("uncompressed: no kill landed mid-apply (some words applied, some not)")
        sg = sweep("gzip", g, d, [0.3, 0.6, 0.9], after_rename=True)
        print(f"uncompressed kill states: {' '.join(st)}")
        print(f"gzip kill states: {' '.join(sg)}")
        if "none" not in sg:
            fail("gzip: no kill landed after the log was complete and before the rename")
    print("ckpt-flip kill -9 chunked OK")


main()
