#!/usr/bin/python3
"""ec-train's results pinned bit for bit: every configuration below (none / ec / ckpt, with and
without failures, 3-6 ranks, synthetic and TSV data) must end with exactly this state_hash and
final loss, in every environment of tests/support/numeric_variants.py (OPENBLAS_CORETYPE set to
each kernel the CPU runs, resil's portable GEMM path). The values belong to numeric configuration
cpu-fma-seqk-1 (docs/design/determinism.md): never change them to make a run pass.

usage: ec_train_pinned.py EC_TRAIN MPIEXEC WORKDIR [--variant NAME] [--record] [--only NAME[,NAME...]]
  --record   print the values of this binary as a PINNED table instead of checking
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ec_train_check import make_tsv  # noqa: E402  the same generator as ec_train_make_tsv

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from numeric_variants import compare, variant  # noqa: E402

SMALL = ["--tables", "4", "--rows", "600", "--dim", "8", "--batch", "48", "--rows-per-fragment", "4",
         "--rebuild-stripes", "20", "--seed", "11", "--steps", "20"]

# name: (ranks, extra arguments)
CASES = {
    "n3_none": (3, ["--k", "2", "--m", "1", "--ft", "none"]),
    "n4_ec_k2m1": (4, ["--k", "2", "--m", "1", "--ft", "ec"]),
    "n4_ec_k2m1_fail": (4, ["--k", "2", "--m", "1", "--ft", "ec", "--fail", "1@7"]),
    "n6_ec_k4m2_two": (6, ["--k", "4", "--m", "2", "--ft", "ec", "--fail", "2@5,3@5"]),
    "n5_ec_k3m2_twice": (5, ["--k", "3", "--m", "2", "--ft", "ec", "--fail", "1@6,1@9", "--seed", "5"]),
    "n6_ckpt_fail": (6, ["--k", "4", "--m", "2", "--ft", "ckpt", "--ckpt-interval", "5", "--fail", "2@12"]),
    "n4_ec_fallback": (4, ["--k", "2", "--m", "1", "--ft", "ec", "--fallback-ckpt", "--ckpt-interval", "5", "--fail", "1@8,2@8"]),
    "n4_ec_lr": (4, ["--k", "3", "--m", "1", "--ft", "ec", "--lr", "0.2", "--mlp-lr", "0.01", "--batch", "30",
                     "--rebuild-stripes", "0", "--fail", "0@3"]),
    "n4_tsv_ec": (4, ["--k", "2", "--m", "2", "--ft", "ec", "--data", "@TSV@", "--fail", "1@7,2@9"]),
}

PINNED = {
    "n3_none": ("e06b1a3d77bf2e85", "0.692155917485555"),
    "n4_ec_k2m1": ("dff1258d1bb42d62", "0.692155917485555"),
    "n4_ec_k2m1_fail": ("dff1258d1bb42d62", "0.692155917485555"),
    "n6_ec_k4m2_two": ("a7900dfd995e1c53", "0.692155917485555"),
    "n5_ec_k3m2_twice": ("9e3eeebc433b81da", "0.6112862030665079"),
    "n6_ckpt_fail": ("a7900dfd995e1c53", "0.692155917485555"),
    "n4_ec_fallback": ("dff1258d1bb42d62", "0.692155917485555"),
    "n4_ec_lr": ("2034387f4ba76c45", "0.6214610417683919"),
    "n4_tsv_ec": ("f23ad61b201a649c", "0.6707994937896729"),
}


def run(exe, mpiexec, work, name, env):
    n, extra = CASES[name]
    tsv = os.path.join(work, "pinned.tsv")
    extra = [tsv if a == "@TSV@" else a for a in extra]
    # Each option once (CLI11 refuses repeats): the case's values replace SMALL's.
    opts = {}
    for lst in (SMALL, extra):
        i = 0
        while i < len(lst):
            if lst[i] == "--fallback-ckpt":
                opts[lst[i]], i = None, i + 1
            else:
                opts[lst[i]], i = lst[i + 1], i + 2
    args = []
    for k, v in opts.items():
        args += [k] if v is None else [k, v]
    report = os.path.join(work, name + ".json")
    ckpt = os.path.join(work, "ckpt_" + name)
    shutil.rmtree(ckpt, ignore_errors=True)
    cmd = [mpiexec, "-n", str(n), exe, *args, "--report", report, "--ckpt-dir", ckpt]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    if p.returncode != 0:
        sys.stdout.write(p.stdout + p.stderr)
        raise SystemExit(f"FAIL: {name}: exit {p.returncode}: {' '.join(cmd)}")
    with open(report) as f:
        r = json.load(f)
    if r.get("numeric", {}).get("id") != "cpu-fma-seqk-1":
        raise SystemExit(f"FAIL: {name}: the report names numeric configuration {r.get('numeric')}, not cpu-fma-seqk-1")
    return r["state_hash"], repr(r["final_loss"])


def main():
    exe, mpiexec, work = sys.argv[1:4]
    record = "--record" in sys.argv
    names = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else list(CASES)
    vname = sys.argv[sys.argv.index("--variant") + 1] if "--variant" in sys.argv else "default"
    v = variant(vname)
    if isinstance(v, str):
        print(f"skipped: variant {vname}: {v}")
        return
    env = v[0]
    work = os.path.join(work, vname)
    os.makedirs(work, exist_ok=True)
    make_tsv([os.path.join(work, "pinned.tsv"), "400"])
    compare({name: run(exe, mpiexec, work, name, env) for name in names}, PINNED, vname, record)

if __name__ == "__main__":
    main()
