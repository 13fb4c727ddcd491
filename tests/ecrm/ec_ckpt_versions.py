#!/usr/bin/python3
"""ec-train and the checkpoint format versions (docs/reference/checkpoint-format.md, "Versions").

usage: ec_ckpt_versions.py EC_TRAIN MPIEXEC WORKDIR

Writes a checkpoint at step 10 of a 20-step --ft ckpt run, then:
  - rewrites its shards as format version 1 wrote them (no /meta optimizer_step; the Adam step in
    /meta/rng_state, format_version 1): resuming from it must end with the uninterrupted run's
    state_hash;
  - removes optimizer_step from a version 2 shard: the resume must be refused with exit 4 and one
    line naming the file and the missing field.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

EXE, MPIEXEC, WORK = sys.argv[1:4]
N = 4
ARGS = ["--tables", "4", "--rows", "600", "--dim", "8", "--batch", "48", "--rows-per-fragment", "4", "--seed", "11",
        "--k", "2", "--m", "1", "--ft", "ckpt", "--ckpt-interval", "10"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(*extra, expect=0):
    cmd = [MPIEXEC, "-n", str(N), EXE, *ARGS, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if p.returncode != expect:
        sys.stdout.write(p.stdout + p.stderr)
        fail(f"exit {p.returncode}, expected {expect}: {' '.join(cmd)}")
    return p


def state_hash(report):
    with open(report) as f:
        return json.load(f)["state_hash"]


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
ref = os.path.join(WORK, "ref.json")
run("--steps", "20", "--ckpt-dir", os.path.join(WORK, "ref_ckpt"), "--report", ref)
manifest = os.path.join(WORK, "ref_ckpt", "ckpt-step00000010.manifest.json")
if not os.path.exists(manifest):
    fail("no checkpoint at step 10")
with h5py.File(os.path.join(WORK, "ref_ckpt", "ckpt-step00000010", "rank-0.h5"), "r") as f:
    meta = f["/meta"].attrs
    if meta["format_version"] != 2 or "optimizer_step" not in meta or meta["optimizer_step"] != 10:
        fail(f"version 2 shard without the expected optimizer_step: {dict(meta)}")
    if len(f["/meta/rng_state"]) != 0:
        fail("ec-train still writes /meta/rng_state")


def variant(name, edit):
    d = os.path.join(WORK, name)
    shutil.copytree(os.path.join(WORK, "ref_ckpt"), d)
    for shard in glob.glob(os.path.join(d, "ckpt-step00000010", "rank-*.h5")):
        with h5py.File(shard, "r+") as f:
            edit(f)
    return os.path.join(d, "ckpt-step00000010.manifest.json")


def as_version_1(f):
    step = int(f["/meta"].attrs["optimizer_step"])
    del f["/meta"].attrs["optimizer_step"]
    f["/meta"].attrs["format_version"] = np.int64(1)
    del f["/meta/rng_state"]
    f["/meta"].create_dataset("rng_state", data=np.array([step], dtype=np.uint64))


def without_optimizer_step(f):
    del f["/meta"].attrs["optimizer_step"]


v1 = variant("v1", as_version_1)
out = os.path.join(WORK, "v1.json")
run("--steps", "20", "--resume", v1, "--ckpt-dir", os.path.join(WORK, "v1_run"), "--report", out)
if state_hash(out) != state_hash(ref):
    fail(f"resumed from version 1: state_hash {state_hash(out)} != uninterrupted {state_hash(ref)}")
print(f"ok: a version 1 checkpoint resumes to the uninterrupted state_hash {state_hash(ref)}")

bad = variant("v2_missing", without_optimizer_step)
p = run("--steps", "20", "--resume", bad, "--ckpt-dir", os.path.join(WORK, "bad_run"), expect=4)
lines = [l for l in p.stderr.splitlines() if l.strip()]
if len(lines) != 1 or not re.search(r"^ec-train: error: .*rank-0\.h5: /meta has no optimizer_step \(format version 2\)", lines[0]):
    fail(f"expected one line naming rank-0.h5 and optimizer_step, got {lines}")
print("ok: a version 2 shard without optimizer_step is refused: " + lines[0])
