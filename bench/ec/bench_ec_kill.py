#!/usr/bin/python3
"""Real deaths, ec vs checkpoints, by embedding state size (CTest bench_ec_kill, label
perf). For each size, through scripts/hpc/ec-train-run.sh (the launcher that relaunches):

  pairs  --reps failure-free pairs of --ft none and --ft ec runs (order alternating): the
         steady-state step times (end of one step to the end of the next) and ec's overhead
         (median over the pairs); all end in one state.
  ec     --ft ec --fallback-ckpt, rank 1 SIGKILLs itself at step K with node loss (--kill 1@K:node:
         its state segment is removed first); its rebuild goes at --rebuild-bytes of lost fragments
         per step, spread over the following steps. The start checkpoint (--fallback-ckpt, interval
         past the end) times one checkpoint write W.
  ckpt   --ft ckpt with the interval I that costs what ec costs in steady state:
         W / (I * t_none) = ec's overhead (at least 1 %), killed the same way half an interval
         after its checkpoint (the expected position of a death; capped at --max-ckpt-kill steps,
         the redo then scaled to half an interval).

Per size: steady-state overhead over none (median step time before the death), time from the death
to the first step of the relaunch, to the first new step (redone work done), to full redundancy,
steps redone, and throughput during the rebuild vs before. --rebuild-sweep adds one ec kill run per
listed rebuild rate: the trade-off between throughput during the rebuild and time to full
redundancy, which is the user's to choose (--rebuild-stripes). Goals are printed as ratios, never
asserted. Results: a table on stdout, OUT/bench_ec_kill.json and OUT/bench_ec_kill.png.

usage: bench_ec_kill.py EC_TRAIN [--sizes 64M,1G,4G] [--ranks 4] [--k 3] [--m 1] [--steady 150]
       [--mpiexec mpiexec] [--launcher scripts/hpc/ec-train-run.sh] [--out DIR] [--ckpt-dir DIR]
       [--rebuild-bytes 256K] [--rebuild-sweep 64K,1M] [--max-ckpt-kill 1500] [--reps 3]
       [--mlp BOTTOM/TOP]   (ec-train's --bottom-mlp/--top-mlp, e.g. 512,256,64/512,256: the DLRM
                             reference's Criteo Kaggle MLPs; default ec-train's own, 32/32)
       [--commit next-step|in-step]   (ec-train's --commit for the ec runs; default next-step)
       bench_ec_kill.py EC_TRAIN --replot A.json[,B.json...] [--out DIR]   (table and plot only)
"""
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TABLES, DIM, FRAG_ROWS, BATCH = 8, 16, 64, 256
ROW_BYTES = 8 * DIM  # weights and Adagrad accumulators, fp32


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def size_bytes(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def human(b):
    return f"{b / (1 << 30):g} GiB" if b >= 1 << 30 else f"{b / (1 << 20):g} MiB"


HERE = os.path.dirname(os.path.abspath(__file__))
EXE = os.path.abspath(sys.argv[1])
SIZES = [size_bytes(s) for s in arg("--sizes", "64M,1G,4G").split(",")]
RANKS, K, M = int(arg("--ranks", "4")), int(arg("--k", "3")), int(arg("--m", "1"))
STEADY = int(arg("--steady", "150"))
WARM = 10
MPIEXEC = arg("--mpiexec", "mpiexec")
LAUNCHER = arg("--launcher", os.path.join(HERE, "..", "..", "scripts", "hpc", "ec-train-run.sh"))
OUT = os.path.abspath(arg("--out", "bench_ec_kill.out"))
CKPT_ROOT = os.path.abspath(arg("--ckpt-dir", os.path.join(OUT, "ckpt")))
REBUILD_BYTES = size_bytes(arg("--rebuild-bytes", "256K"))
SWEEP = [size_bytes(b) for b in arg("--rebuild-sweep", "").split(",") if b]
REPS = int(arg("--reps", "3"))
MAX_CKPT_KILL = int(arg("--max-ckpt-kill", "1500"))
VICTIM = 1
MLP = arg("--mlp", "32/32")
COMMIT = arg("--commit", "next-step")  # ec-train's --commit for every ec run
EC = ["--ft", "ec", "--commit", COMMIT]
if MLP.count("/") != 1:
    sys.exit(f"bench_ec_kill.py: --mlp {MLP}: expected BOTTOM/TOP, like 512,256,64/512,256")
BOTTOM_MLP, TOP_MLP = MLP.split("/")


def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def fits(state):
    """Memory the largest run needs at once, and whether the machine has it now."""
    store = state * (1 + M / K)                  # data and parity in /dev/shm (the segments)
    undo = RANKS * 2 * 2 * BATCH * TABLES * (16 + ROW_BYTES)
    heap = 2 * state                             # a checkpoint write / load holds a copy of the shard, HDF5 another chunk
    need = store + undo + heap
    shm = shutil.disk_usage("/dev/shm").free
    disk = shutil.disk_usage(os.path.dirname(CKPT_ROOT) if not os.path.exists(CKPT_ROOT) else CKPT_ROOT).free
    avail = meminfo("MemAvailable")
    why = []
    if need > 0.9 * avail:
        why.append(f"needs {human(need)} of memory (segments {human(store)}, checkpoint copies {human(heap)}),"
                   f" {human(avail)} available")
    if store > 0.9 * shm:
        why.append(f"segments need {human(store)} in /dev/shm, {human(shm)} free")
    if 3 * state > 0.9 * disk:
        why.append(f"checkpoints need {human(3 * state)} on disk, {human(disk)} free")
    return need, avail, why


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(name, extra, timeout=3600):
    """One job through the launcher; returns (report, wall seconds)."""
    report = os.path.join(OUT, name + ".json")
    job = f"bench-kill-{os.getpid()}-{name}"
    cmd = [LAUNCHER, "-n", str(RANKS), "--mpiexec", MPIEXEC, "--ec-train", EXE, "--max-restarts", "2", "--",
           "--tables", str(TABLES), "--dim", str(DIM), "--rows-per-fragment", str(FRAG_ROWS), "--batch", str(BATCH),
           "--k", str(K), "--m", str(M), "--bottom-mlp", BOTTOM_MLP, "--top-mlp", TOP_MLP, "--seed", "3", "--job-id", job, "--report", report, *extra]
    t0 = time.monotonic()
    with open(os.path.join(OUT, name + ".log"), "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout).returncode
    wall = time.monotonic() - t0
    subprocess.run([EXE, "--cleanup", "--job-id", job], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if rc != 0:
        raise RuntimeError(f"{name}: launcher exit {rc} (log {OUT}/{name}.log)")
    with open(report) as f:
        return json.load(f), wall


def end_to_end(rows):
    """(step, t_end, phase) in timeline order -> (step, seconds since the previous step's end, phase)
    for each step that directly follows the one before it."""
    return [(s, t - t0, p) for (s0, t0, _), (s, t, p) in zip(rows, rows[1:]) if s == s0 + 1]


def steady_dt(rep, last_step):
    """Median step time of the steps WARM+1 .. last_step of the first launch (no recovery): from the
    end of one step to the end of the next, so that everything between two steps counts (the
    timeline's `dt` leaves out what follows a step's end, e.g. --ft none's commit, and a wait for
    the slowest rank at the next step's first collective)."""
    tl = rep["timeline"]
    dt = [d for s, d, p in end_to_end(list(zip(tl["step"], tl["t"], tl["phase"]))) if WARM < s <= last_step and p == "normal"]
    return statistics.median(dt), dt


def recovery(rep, kill_step):
    """Times from the death (the last commit before it, `t_fail`) of the report's one failure."""
    f = rep["failures"][0]
    tl = rep["timeline"]
    death = f["t_fail"]
    after = [(s, t - d, d, p) for s, t, d, p in zip(tl["step"], tl["t"], tl["dt"], tl["phase"]) if t - d > death]
    first = after[0][1] - death
    caught = next(t0 for s, t0, d, p in after if s >= kill_step) - death
    back_to = f.get("rollback_to", -1)
    if back_to is None or back_to < 0:
        back_to = f["step"] - 1  # ec: the step every rank had committed
    # Step times during the recovery, measured as steady_dt measures them (end to end).
    during = [d for s, d, p in end_to_end([(s, t0 + d, p) for s, t0, d, p in after]) if p != "normal"]
    return {"restart_s": f["restart_s"], "attach_s": f["attach_s"], "first_step_s": first, "caught_up_s": caught,
            "redundant_s": f["time_to_redundancy_s"], "redone_steps": kill_step - 1 - back_to,
            "load_s": f.get("load_s"), "degraded_steps": f.get("degraded_steps"), "during_dt": during,
            "throughput": rep.get("throughput", {})}


def rebuild_point(per_step, rec, rep):
    """One rebuild rate's cost: throughput during the rebuild over before, and time to redundancy."""
    thr = rep.get("throughput", {})
    before, during = thr.get("before", {}).get("samples_per_s", 0), thr.get("during", {}).get("samples_per_s", 0)
    return {"rebuild_stripes": per_step, "rebuild_bytes_per_step": per_step * FRAG_ROWS * ROW_BYTES,
            "during_over_before": during / before if before else 0, "redundant_s": rec["redundant_s"],
            "caught_up_s": rec["caught_up_s"], "degraded_steps": rec["degraded_steps"]}


def bench_size(state):
    rows = state // (TABLES * ROW_BYTES)
    label = human(state)
    tag = label.replace(" ", "")
    need, avail, why = fits(state)
    res = {"state_bytes": state, "rows": rows, "label": label, "mem_need": need, "mem_available": avail, "mlp": MLP, "commit": COMMIT,
           "ranks": RANKS, "k": K, "m": M}
    print(f"\n== {label}: {TABLES} tables x {rows} rows x dim {DIM}; needs ~{human(need)}, {human(avail)} available;"
          f" load {load()}", flush=True)
    if why:
        print("   skipped: " + "; ".join(why), flush=True)
        res["skipped"] = "; ".join(why)
        return res
    res["load_before"] = load()
    sizes = ["--rows", str(rows)]
    kill = WARM + STEADY + 1
    # A replacement's lost members: its share of data and parity. Rebuilt REBUILD_BYTES per step.
    stripes = TABLES * math.ceil(rows / (FRAG_ROWS * K))
    frag = FRAG_ROWS * ROW_BYTES
    per_step = max(1, REBUILD_BYTES // frag)
    lost = math.ceil(stripes * (K + M) / RANKS)
    rebuild_steps = math.ceil(lost / per_step)
    res.update({"stripes": stripes, "rebuild_stripes": per_step, "lost_members": lost})

    steps = kill + rebuild_steps + 20
    # Steady state: REPS failure-free pairs (none, ec), alternating which runs first (the second
    # run of a pair tends to be slower on this shared machine); overhead = median over the pairs.
    pairs, hashes, wall = [], set(), {"pairs": 0.0}
    for i in range(REPS):
        order = [("none", ["--ft", "none"]), ("ec", EC)] if i % 2 == 0 else [("ec", EC), ("none", ["--ft", "none"])]
        t = {}
        for ft, extra in order:
            rep, w_s = run(f"ss_{ft}_{tag}_{i}", sizes + extra + ["--steps", str(WARM + STEADY), "--ckpt-dir", os.path.join(CKPT_ROOT, "none")])
            t[ft] = steady_dt(rep, WARM + STEADY)[0]
            hashes.add(rep["state_hash"])
            wall["pairs"] += w_s
        pairs.append((t["ec"] / t["none"] - 1, t["none"], t["ec"]))
    pairs.sort()
    ov_ec = statistics.median(p[0] for p in pairs)
    t_none, t_ec = statistics.median(p[1] for p in pairs), statistics.median(p[2] for p in pairs)
    ck_ec = os.path.join(CKPT_ROOT, f"ec_{tag}")
    ec, wall["ec"] = run(f"ec_{tag}", sizes + EC + ["--steps", str(steps), "--rebuild-stripes", str(per_step),
                                              "--kill", f"{VICTIM}@{kill}:node", "--fallback-ckpt", "--ckpt-interval", "1000000000",
                                              "--ckpt-dir", ck_ec])
    shutil.rmtree(ck_ec, ignore_errors=True)
    w = ec["checkpoints"]["write_s"] / max(1, ec["checkpoints"]["writes"])
    target = max(ov_ec, 0.01)
    interval = max(2, math.ceil(w / (target * t_none)))
    ck_kill = max(2, min(interval // 2, MAX_CKPT_KILL))
    ck_dir = os.path.join(CKPT_ROOT, f"ckpt_{tag}")
    ck, wall["ckpt"] = run(f"ckpt_{tag}", sizes + ["--ft", "ckpt", "--steps", str(ck_kill + 20), "--ckpt-interval", str(interval),
                                               "--kill", f"{VICTIM}@{ck_kill}:node", "--ckpt-dir", ck_dir])
    shutil.rmtree(ck_dir, ignore_errors=True)
    res["load_after"] = load()
    rec_ec, rec_ck = recovery(ec, kill), recovery(ck, ck_kill)
    # ckpt's expected redo is half an interval; when the kill was capped earlier, scale the redo.
    scale = (interval / 2) / (ck_kill - 1) if interval // 2 > ck_kill else 1.0
    redo_s = rec_ck["caught_up_s"] - rec_ck["first_step_s"]
    rec_ck["expected_redone_steps"] = rec_ck["redone_steps"] * scale
    rec_ck["expected_caught_up_s"] = rec_ck["first_step_s"] + redo_s * scale
    thr = ec.get("throughput", {})
    before, during = thr.get("before", {}).get("samples_per_s", 0), thr.get("during", {}).get("samples_per_s", 0)
    res.update({
        "t_none": t_none, "t_ec": t_ec, "overhead_ec": ov_ec, "ckpt_write_s": w, "ckpt_interval": interval,
        "overhead_ckpt": w / (interval * t_none), "ckpt_kill_step": ck_kill, "ec_kill_step": kill, "ec": rec_ec, "ckpt": rec_ck,
        "throughput_before": before, "throughput_during": during,
        "during_over_before": during / before if before else 0,
        "median_during_over_before": statistics.median(steady_dt(ec, kill - 1)[1]) / statistics.median(rec_ec["during_dt"]) if rec_ec["during_dt"] else 0,
        "overhead_pairs": [p[0] for p in pairs], "hash_equal_none_ec": len(hashes) == 1, "wall_s": wall,
    })
    for r in (rec_ec, rec_ck):
        r.pop("during_dt")
    res["sweep"] = [rebuild_point(REBUILD_BYTES // frag, rec_ec, ec)]
    for b in SWEEP:
        per = max(1, b // frag)
        ck_rb = os.path.join(CKPT_ROOT, f"ec_{tag}_rb{per}")  # the same flags as the ec run above
        rep, _ = run(f"ec_{tag}_rb{per}", sizes + EC + ["--steps", str(kill + math.ceil(lost / per) + 20),
                                                 "--rebuild-stripes", str(per), "--kill", f"{VICTIM}@{kill}:node",
                                                 "--fallback-ckpt", "--ckpt-interval", "1000000000", "--ckpt-dir", ck_rb])
        shutil.rmtree(ck_rb, ignore_errors=True)
        res["sweep"].append(rebuild_point(per, recovery(rep, kill), rep))
    res["sweep"].sort(key=lambda p: p["rebuild_bytes_per_step"])
    print(f"   none {1e3 * t_none:.2f} ms/step, ec {1e3 * t_ec:.2f} ms/step ({100 * ov_ec:+.1f} % median of {REPS} pairs,"
          f" range {100 * pairs[0][0]:+.1f} .. {100 * pairs[-1][0]:+.1f} %); checkpoint write {w:.3f} s"
          f" -> interval {interval} steps (ckpt overhead {100 * res['overhead_ckpt']:.1f} %); ec's rebuild {per_step} stripes/step"
          f" over ~{rebuild_steps} steps; load after {res['load_after']}", flush=True)
    return res


def table(results):
    print("\nsize      | ovh ec | ovh ckpt (interval) | first step ec / ckpt (x)   | caught up ec / ckpt (x)     |"
          " redundant ec / ckpt   | redone ec / ckpt | thr. rebuild/before")
    for r in results:
        if "skipped" in r:
            print(f"{r['label']:<9} | skipped: {r['skipped']}")
            continue
        e, c = r["ec"], r["ckpt"]
        cu = c["expected_caught_up_s"]
        print(f"{r['label']:<9} | {100 * r['overhead_ec']:+5.1f}% | {100 * r['overhead_ckpt']:5.1f}% ({r['ckpt_interval']:>6}) |"
              f" {e['first_step_s']:6.3f} / {c['first_step_s']:6.3f} s ({c['first_step_s'] / e['first_step_s']:5.1f}x) |"
              f" {e['caught_up_s']:6.3f} / {cu:7.2f} s ({cu / e['caught_up_s']:6.1f}x) |"
              f" {e['redundant_s']:6.2f} / {cu:6.2f} s | {e['redone_steps']:>4} / {c['expected_redone_steps']:>6.0f}  |"
              f" {100 * r['during_over_before']:.0f}% (median {100 * r['median_during_over_before']:.0f}%)")
    if any(len(r.get("sweep", [])) > 1 for r in results):
        print("\nrebuild rate (--rebuild-stripes): throughput during the rebuild vs before, and time from the death to full redundancy")
        for r in results:
            for p in r.get("sweep", []):
                print(f"  {r['label']:<9} {p['rebuild_bytes_per_step'] >> 10:>6} KiB/step ({p['rebuild_stripes']:>4} stripes):"
                      f" throughput {100 * p['during_over_before']:5.1f} %, redundant after {p['redundant_s']:7.2f} s"
                      f" ({p['degraded_steps']} degraded steps)")
    print("\ngoals (ratios, not asserted): ec overhead <= 5 % at every size; at >= 1 GiB ec trains again >= 10x sooner"
          " than ckpt and redoes no step; throughput during the rebuild >= 90 % of before")
    for r in results:
        if "skipped" in r:
            continue
        e, c = r["ec"], r["ckpt"]
        print(f"  {r['label']}: overhead {100 * r['overhead_ec']:+.1f} % (goal <= 5 %);"
              f" trains again {c['first_step_s'] / e['first_step_s']:.1f}x sooner (first step), "
              f"{c['expected_caught_up_s'] / e['caught_up_s']:.1f}x (new work) (goal >= 10x);"
              f" redone {e['redone_steps']} step(s) (goal 0); rebuild throughput {100 * r['during_over_before']:.0f} % (goal >= 90 %)")


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: plot skipped")
        return
    rs = [r for r in results if "skipped" not in r]
    if not rs:
        return
    x = [r["state_bytes"] / (1 << 20) for r in rs]
    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    series = [
        (ax[0][0], "steady-state overhead over --ft none (%)", [100 * r["overhead_ec"] for r in rs], [100 * r["overhead_ckpt"] for r in rs], False),
        (ax[0][1], "death -> first new step (s)", [r["ec"]["caught_up_s"] for r in rs], [r["ckpt"]["expected_caught_up_s"] for r in rs], True),
        (ax[1][0], "death -> full redundancy (s)", [r["ec"]["redundant_s"] for r in rs], [r["ckpt"]["expected_caught_up_s"] for r in rs], True),
        (ax[1][1], "steps redone", [r["ec"]["redone_steps"] for r in rs], [r["ckpt"]["expected_redone_steps"] for r in rs], True),
    ]
    for a, title, ec, ck, logy in series:
        a.plot(x, ec, "o-", label="ec (relaunch, rebuild from parity)")
        a.plot(x, ck, "s--", label="ckpt (relaunch, reload, redo)")
        a.set_xscale("log", base=2)
        if logy:  # steps redone may be 0 (--commit in-step): linear below 1
            if title == "steps redone":
                a.set_yscale("symlog", linthresh=1)
                a.set_ylim(bottom=0)
            else:
                a.set_yscale("log")
        a.set_title(title)
        a.set_xlabel("embedding state (MiB)")
        a.grid(True, which="both", alpha=0.3)
    ax[0][1].plot(x, [r["ec"]["first_step_s"] for r in rs], "o:", label="ec: first step of the relaunch")
    ax[0][1].plot(x, [r["ckpt"]["first_step_s"] for r in rs], "s:", label="ckpt: first (redone) step")
    ax[0][0].legend(fontsize=8)
    ax[0][1].legend(fontsize=8)
    commit = rs[0].get("commit", "next-step")
    fig.suptitle(f"ec-train, kill -9 with node loss: {RANKS} ranks, k={K} m={M}, --commit {commit}, {os.cpu_count()} cores")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")
    swept = [r for r in rs if len(r.get("sweep", [])) > 1]
    if swept:
        fig, a = plt.subplots(figsize=(6.5, 4.5))
        for r in swept:
            pts = r["sweep"]
            a.plot([p["redundant_s"] for p in pts], [100 * p["during_over_before"] for p in pts], "o-", label=r["label"])
            for p in pts:
                a.annotate(f"{p['rebuild_bytes_per_step'] >> 10} KiB", (p["redundant_s"], 100 * p["during_over_before"]),
                           fontsize=7, xytext=(4, 4), textcoords="offset points")
        a.axhline(90, color="grey", ls=":", lw=1)
        a.set_xscale("log")
        a.set_xlabel("death -> full redundancy (s)")
        a.set_ylabel("throughput during the rebuild / before (%)")
        a.set_title("rebuild rate per step (--rebuild-stripes)", fontsize=10)
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=8)
        fig.tight_layout()
        rpath = path.replace(".png", "_rebuild.png")
        fig.savefig(rpath, dpi=110)
        print(f"plot: {rpath}")


def main():
    os.makedirs(OUT, exist_ok=True)
    if "--replot" in sys.argv:  # the table and plot of earlier results (comma-separated JSON files)
        results = [r for f in arg("--replot", "").split(",") for r in json.load(open(f))]
        table(results)
        plot(results, os.path.join(OUT, "bench_ec_kill.png"))
        return 0
    print(f"bench_ec_kill: {RANKS} ranks, k={K} m={M}, --commit {COMMIT}, {TABLES} tables x dim {DIM}, batch {BATCH}, MLPs {MLP}, {FRAG_ROWS} rows per fragment,"
          f" kill -9 of rank {VICTIM} with node loss; machine: {os.cpu_count()} cores, {human(meminfo('MemTotal'))}; load {load()}")
    results = []
    for s in SIZES:
        results.append(bench_size(s))
        with open(os.path.join(OUT, "bench_ec_kill.json"), "w") as f:
            json.dump(results, f, indent=1)
    table(results)
    plot(results, os.path.join(OUT, "bench_ec_kill.png"))
    bad = [r["label"] for r in results if "skipped" not in r and not r["hash_equal_none_ec"]]
    if bad:
        print(f"FAIL: ec ended in another state than none at {bad}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
