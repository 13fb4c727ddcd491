#!/usr/bin/python3
"""A/B step time of two ec-train binaries (e.g. before and after a refactor), interleaved so that
both see the same machine load: for each configuration, REPS rounds of one run of A and one of B
(alternating which goes first), the median step time of each run (end to end of consecutive
steps, first 10 steps skipped), and the
median over rounds of B/A with its range. Every run of a configuration must end with one
state_hash (A and B compute the same thing), unless --other-numerics says that A and B compute
under different numeric configurations (then each binary must be consistent with itself).

usage: bench_ec_train_ab.py EC_TRAIN_A EC_TRAIN_B [--ranks 6] [--steps 200] [--reps 8] [--mpiexec mpiexec]
       [--km 4:1,4:2] [--other-numerics] [-- EC_TRAIN_ARGS...]
  --km: the (k, m) of the ec configurations measured after --ft none (2 ranks: --km 1:1);
  arguments after -- go to every run (e.g. --rows 262144 --bottom-mlp 512,256,64).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


A, B = sys.argv[1], sys.argv[2]
RANKS, STEPS, REPS = int(arg("--ranks", "6")), int(arg("--steps", "200")), int(arg("--reps", "8"))
MPIEXEC = arg("--mpiexec", "mpiexec")
KM = [tuple(x.split(":")) for x in arg("--km", "4:1,4:2").split(",")]
COMMON = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
OTHER_NUMERICS = "--other-numerics" in sys.argv[:sys.argv.index("--") if "--" in sys.argv else len(sys.argv)]
WORK = tempfile.mkdtemp(prefix="bench_ec_train_ab.")


def run(exe, extra):
    report, ckpt = os.path.join(WORK, "r.json"), os.path.join(WORK, "ckpt")
    shutil.rmtree(ckpt, ignore_errors=True)
    cmd = [MPIEXEC, "-n", str(RANKS), exe, "--steps", str(STEPS), "--seed", "3", "--report", report, "--ckpt-dir", ckpt, *COMMON, *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=600)
    with open(report) as f:
        r = json.load(f)
    # From the end of one step to the end of the next: all a step costs (the timeline's dt leaves
    # out what follows a step's end, e.g. --ft none's commit).
    t = r["timeline"]["t"][10:]
    dt = sorted(b - a for a, b in zip(t, t[1:]))
    return dt[len(dt) // 2], r["state_hash"]


def main():
    print(f"A = {A}\nB = {B}\n{RANKS} ranks, {STEPS} steps, {REPS} interleaved rounds, load {os.getloadavg()[0]:.1f}")
    print(f"{'config':<16}{'A ms':>9}{'B ms':>9}{'B/A':>8}  range")
    ok = True
    print(f"common arguments: {' '.join(COMMON) or '(none)'}")
    configs = [("none", ["--ft", "none", "--k", KM[0][0], "--m", KM[0][1]])]
    configs += [(f"ec k={k} m={m}", ["--ft", "ec", "--k", k, "--m", m]) for k, m in KM]
    for name, extra in configs:
        ta, tb, ratios, hashes = [], [], [], {A: set(), B: set()}
        for i in range(REPS):
            order = [(A, ta), (B, tb)] if i % 2 == 0 else [(B, tb), (A, ta)]
            for exe, out in order:
                t, h = run(exe, extra)
                out.append(t)
                hashes[exe].add(h)
            ratios.append(tb[-1] / ta[-1])
        ratios.sort()
        print(f"{name:<16}{1e3 * statistics.median(ta):9.2f}{1e3 * statistics.median(tb):9.2f}{statistics.median(ratios):8.3f}"
              f"  [{ratios[0]:.3f}, {ratios[-1]:.3f}]")
        states = hashes[A] | hashes[B]
        if len(hashes[A]) != 1 or len(hashes[B]) != 1 or (len(states) != 1 and not OTHER_NUMERICS):
            print(f"FAIL: {name}: the runs ended in different states (A {sorted(hashes[A])}, B {sorted(hashes[B])})")
            ok = False
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    shutil.rmtree(WORK, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
