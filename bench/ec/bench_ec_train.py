#!/usr/bin/python3
"""ec-train benchmarks (CTest label perf): step time with --ft none / ec / ckpt at several
checkpoint intervals in one run, recovery time (full redundancy) ec vs ckpt, and throughput while
recovering. The baseline (--ft none, measured in the same run, alternating with the others)
is printed with every ratio.

usage: bench_ec_train.py EC_TRAIN [--ranks 6] [--steps 200] [--reps 6] [--mpiexec mpiexec]

Every measurement is repeated --reps times (each configuration next to its own baseline run,
alternating which runs first) and the median is reported with the range: with ranks
oversubscribing the cores, single runs move by several percent.
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


EXE = sys.argv[1]
RANKS = int(arg("--ranks", "6"))
STEPS = int(arg("--steps", "200"))
REPS = int(arg("--reps", "6"))
MPIEXEC = arg("--mpiexec", "mpiexec")
WORK = tempfile.mkdtemp(prefix="bench_ec_train.")


def run(name, *extra):
    report = os.path.join(WORK, name + ".json")
    ckpt = os.path.join(WORK, "ckpt_" + name)
    shutil.rmtree(ckpt, ignore_errors=True)
    cmd = [MPIEXEC, "-n", str(RANKS), EXE, "--steps", str(STEPS), "--seed", "3", "--report", report, "--ckpt-dir", ckpt, *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=600)
    shutil.rmtree(ckpt, ignore_errors=True)
    with open(report) as f:
        return json.load(f)


def mean_step(rep, skip=10):
    # Median step time: on a shared, oversubscribed machine single steps stall when another
    # process takes the core; the median is what a step costs. The first steps warm caches.
    dt = sorted(rep["timeline"]["dt"][skip:])
    return dt[len(dt) // 2]


def main():
    print(f"ec-train benchmark: {RANKS} ranks, {STEPS} steps, machine cores: {os.cpu_count()}"
          + ("  (ranks oversubscribe the cores)" if RANKS > (os.cpu_count() or 1) else ""))
    # 1. Step time, failure-free. Each configuration alternates with a fresh baseline run.
    print("\n1. median step time without failures (ms); overhead = (t - t_none) / t_none,"
          f" median of {REPS} baseline/config pairs [range]")
    print(f"{'config':<28}{'t_none':>9}{'t':>9}{'overhead':>10}  range")
    hashes = set()
    overhead = {}
    for name, extra in [("ec k=4 m=1", ["--ft", "ec", "--k", "4", "--m", "1"]),
                        ("ec k=4 m=2", ["--ft", "ec", "--k", "4", "--m", "2"]),
                        ("ckpt every 1 step", ["--ft", "ckpt", "--ckpt-interval", "1"]),
                        ("ckpt every 10 steps", ["--ft", "ckpt", "--ckpt-interval", "10"]),
                        ("ckpt every 50 steps", ["--ft", "ckpt", "--ckpt-interval", "50"])]:
        pairs = []
        for i in range(REPS):
            # Alternate which of the pair runs first (ABBA...): the second run of a pair tends to
            # be slower here (the first one's teardown), which would bias every overhead upwards.
            if i % 2 == 0:
                base = run("none", "--ft", "none")
                rep = run(name.replace(" ", "_").replace("=", ""), *extra)
            else:
                rep = run(name.replace(" ", "_").replace("=", ""), *extra)
                base = run("none", "--ft", "none")
            hashes.update([base["state_hash"], rep["state_hash"]])
            t0, t1 = mean_step(base), mean_step(rep)
            pairs.append(((t1 - t0) / t0, t0, t1))
        pairs.sort()
        ov = statistics.median(p[0] for p in pairs)
        t0, t1 = statistics.median(p[1] for p in pairs), statistics.median(p[2] for p in pairs)
        overhead[name] = ov
        print(f"{name:<28}{1e3 * t0:9.2f}{1e3 * t1:9.2f}{100 * ov:9.1f}%  [{100 * pairs[0][0]:+.1f}, {100 * pairs[-1][0]:+.1f}]")
    if overhead["ckpt every 1 step"] > 0:
        for ec in ("ec k=4 m=1", "ec k=4 m=2"):
            cut = 1 - overhead[ec] / overhead["ckpt every 1 step"]
            print(f"{ec}: {100 * cut:.0f}% less overhead than checkpointing every step (same recovery point)")

    # 2. Recovery: one rank fails at step 140. ec rebuilds while training; ckpt (interval 50)
    # reloads step 100 and redoes 39 steps.
    fail_step = min(140, STEPS - 30)
    fail = ["--fail", f"2@{fail_step}"]
    print(f"\n2. recovery after one failure at step {fail_step} (s until full redundancy)")
    ec = run("rec_ec", "--ft", "ec", "--k", "4", "--m", "1", *fail)
    ec_all = run("rec_ec_all", "--ft", "ec", "--k", "4", "--m", "1", "--rebuild-stripes", "0", *fail)
    ck = run("rec_ckpt", "--ft", "ckpt", "--ckpt-interval", "50", *fail)
    hashes.update([ec["state_hash"], ec_all["state_hash"], ck["state_hash"]])
    fe, fa, fc = ec["failures"][0], ec_all["failures"][0], ck["failures"][0]
    print(f"ckpt (interval 50): load {fc['load_s']:.3f} s + redo {fc['redo_steps']} steps {fc['redo_s']:.3f} s"
          f" = {fc['time_to_redundancy_s']:.3f} s")
    print(f"ec, rebuild spread over steps: {fe['time_to_redundancy_s']:.3f} s wall over {fe['degraded_steps']} steps"
          f" (rebuild work {fe['rebuild_s']:.3f} s); speedup vs ckpt {fc['time_to_redundancy_s'] / fe['time_to_redundancy_s']:.1f}x")
    print(f"ec, rebuild all at once:       {fa['time_to_redundancy_s']:.3f} s (rebuild work {fa['rebuild_s']:.3f} s);"
          f" speedup vs ckpt {fc['time_to_redundancy_s'] / max(fa['time_to_redundancy_s'], 1e-9):.1f}x")

    # 3. Throughput while recovering (ec, spread rebuild) relative to before the failure, over
    # REPS runs (the first is the recovery run above).
    ratios = []
    for i in range(REPS):
        r = ec if i == 0 else run("rec_ec", "--ft", "ec", "--k", "4", "--m", "1", *fail)
        hashes.add(r["state_hash"])
        thr = r["throughput"]
        before, during = thr["before"]["samples_per_s"], thr.get("during", {}).get("samples_per_s", 0)
        after = thr.get("after", {}).get("samples_per_s", 0)
        ratios.append(during / before)
        print(f"\n3. ec throughput, run {i + 1}: before {before:.0f}, during recovery {during:.0f}"
              f" ({100 * during / before:.0f}% of before), after {after:.0f} samples/s", end="")
    ratios.sort()
    print(f"\n   during/before: median {100 * statistics.median(ratios):.0f}%"
          f" [{100 * ratios[0]:.0f}, {100 * ratios[-1]:.0f}] over {REPS} runs")
    print(f"\nstate_hash over all runs: {sorted(hashes)}")
    shutil.rmtree(WORK, ignore_errors=True)
    if len(hashes) != 1:
        print("FAIL: runs ended in different states")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
