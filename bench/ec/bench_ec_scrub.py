#!/usr/bin/python3
"""ec-train --scrub: its cost over --ft ec without scrub, by embedding state size (CTest
bench_ec_scrub, label perf). For each size, --reps rounds; each round runs, in an order that
rotates, one job of every mode on the same seed:

  ec              --ft ec (the baseline)
  touched         --ft ec --scrub (the rows each step reads are checked before it reads them; parity
                  rows as the deltas fold in)
  touched+sweep   --ft ec --scrub --scrub-cadence touched+sweep --scrub-sweep S (and S stripes per
                  step checked in the background)

Per mode: the median steady-state step time (end of one step to the end of the next, after the
first --warm steps), the overhead against ec in the same round (median and range over rounds), the
scrub's own check and repair seconds per step from the report, and whether every run ended in one
state (scrub changes no bit of a fault-free run). Goals are printed as ratios, never asserted.
Results: a table on stdout and OUT/bench_ec_scrub.json.

usage: bench_ec_scrub.py EC_TRAIN [--sizes 64M,256M,1G] [--ranks 4] [--k 3] [--m 1] [--steps 80] [--warm 10]
       [--reps 3] [--sweep 16] [--mlp 512,256,64/512,256] [--mpiexec mpiexec] [--out DIR]
"""
import json
import os
import statistics
import subprocess
import sys
import time

TABLES, DIM, FRAG_ROWS, BATCH = 8, 16, 64, 256
ROW_BYTES = 8 * DIM  # weights and Adagrad accumulators, fp32


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def size_bytes(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
    sys.exit(__doc__)
EXE = os.path.abspath(sys.argv[1])
SIZES = arg("--sizes", "64M,256M").split(",")
RANKS, K, M = int(arg("--ranks", "4")), int(arg("--k", "3")), int(arg("--m", "1"))
STEPS, WARM, REPS, SWEEP = int(arg("--steps", "80")), int(arg("--warm", "10")), int(arg("--reps", "3")), int(arg("--sweep", "16"))
BOTTOM_MLP, TOP_MLP = arg("--mlp", "512,256,64/512,256").split("/")
MPIEXEC = arg("--mpiexec", "mpiexec")
OUT = os.path.abspath(arg("--out", "bench_ec_scrub.out"))
MODES = {
    "ec": [],
    "touched": ["--scrub"],
    "touched+sweep": ["--scrub", "--scrub-cadence", "touched+sweep", "--scrub-sweep", str(SWEEP)],
}


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(name, rows, extra):
    report = os.path.join(OUT, name + ".json")
    cmd = [MPIEXEC, "-n", str(RANKS), EXE, "--tables", str(TABLES), "--rows", str(rows), "--dim", str(DIM), "--rows-per-fragment", str(FRAG_ROWS),
           "--batch", str(BATCH), "--k", str(K), "--m", str(M), "--bottom-mlp", BOTTOM_MLP, "--top-mlp", TOP_MLP, "--steps", str(STEPS),
           "--seed", "3", "--ft", "ec", "--report", report, *extra]
    with open(os.path.join(OUT, name + ".log"), "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=3600).returncode
    if rc != 0:
        raise RuntimeError(f"{name}: exit {rc} (log {OUT}/{name}.log)")
    with open(report) as f:
        return json.load(f)


def steady(rep):
    tl = rep["timeline"]
    secs = [s for st, s in zip(tl["step"], tl["step_s"]) if st > WARM]
    return statistics.median(secs)


def main():
    os.makedirs(OUT, exist_ok=True)
    print(f"bench_ec_scrub: {RANKS} ranks, k={K} m={M}, {TABLES} tables x dim {DIM}, batch {BATCH}, MLPs {BOTTOM_MLP}/{TOP_MLP}, "
          f"{FRAG_ROWS} rows per fragment, {STEPS} steps ({WARM} warm-up), {REPS} rounds, sweep {SWEEP} stripes/step; load {load()}", flush=True)
    results = []
    for label in SIZES:
        state = size_bytes(label)
        rows = state // (TABLES * ROW_BYTES)
        per = {m: [] for m in MODES}
        hashes, scrub_s = set(), {m: [] for m in MODES}
        t0 = time.monotonic()
        for r in range(REPS):
            order = list(MODES)[r % len(MODES):] + list(MODES)[:r % len(MODES)]
            for mode in order:
                rep = run(f"{label}-{mode}-{r}", rows, MODES[mode])
                per[mode].append(steady(rep))
                hashes.add(rep["state_hash"])
                if rep.get("scrub"):
                    sc = rep["scrub"]
                    scrub_s[mode].append((sc["check_s"] + sc["repair_s"]) / STEPS)
        res = {"size": label, "state_bytes": state, "rows": rows, "one_state": len(hashes) == 1, "modes": {}, "load_after": load(),
               "seconds": time.monotonic() - t0}
        for mode in MODES:
            over = [per[mode][i] / per["ec"][i] - 1 for i in range(REPS)]
            res["modes"][mode] = {"step_s": per[mode], "median_step_s": statistics.median(per[mode]), "overhead": over,
                                  "median_overhead": statistics.median(over),
                                  "scrub_s_per_step": statistics.median(scrub_s[mode]) if scrub_s[mode] else 0.0}
        results.append(res)
        print(f"\n== {label}: {TABLES} x {rows} rows; one state: {res['one_state']}; load {res['load_after']}")
        print(f"{'mode':<15} {'ms/step (median)':>17} {'vs ec: median [range]':>28} {'scrub work ms/step':>20}")
        for mode, v in res["modes"].items():
            o = v["overhead"]
            print(f"{mode:<15} {1e3 * v['median_step_s']:>17.2f} {100 * v['median_overhead']:>+12.1f} % [{100 * min(o):+.1f}, {100 * max(o):+.1f}]"
                  f" {1e3 * v['scrub_s_per_step']:>20.3f}")
        sys.stdout.flush()
    with open(os.path.join(OUT, "bench_ec_scrub.json"), "w") as f:
        json.dump({"ranks": RANKS, "k": K, "m": M, "steps": STEPS, "warm": WARM, "reps": REPS, "sweep": SWEEP, "mlp": f"{BOTTOM_MLP}/{TOP_MLP}",
                   "results": results}, f, indent=1)
    if not all(r["one_state"] for r in results):
        sys.exit("bench_ec_scrub: error: the modes ended in different states")


main()
