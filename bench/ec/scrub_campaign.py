#!/usr/bin/python3
"""A fault-injection campaign of in-memory flips against ec-train (CTest scrub_campaign, label perf;
ec_train_campaign_small runs a small one): each trial is one ec-train run with one --inject flip (a
seed of its own: the rank, the site and the bit drawn from it; --bits and --model as ckpt-flip
inject's), classified against the fault-free run of the same configuration (its state_hash, which
covers every rank's MLP replica and Adam state, and its final loss). Targets: row (a shard row:
weights or Adagrad accumulators), parity (a parity row), mlp (an MLP replica's parameter), opt (its
Adam state). Cadences: off (--ft ec without --scrub), touched (the default --scrub), sweep:S
(--scrub-cadence sweep, S stripes per step) and touched+sweep:S.

Classes of a trial:
  repaired   the scrub repaired the flipped row and the run ended in the fault-free state
  masked     the fault-free state without any repair (the flipped bits were overwritten unread)
  escaped    the run completed in another state (a silent escape: the flip was trained on), with
             `repaired_late` when the scrub repaired the row after the flip had already been read,
             and `replicas_diverged` when the ranks' MLP replicas ended different
  detected   the run stopped with an error (exit 8: beyond repair; 1: parity found different from
             the data at the end, which --ft ec checks without --scrub too)
Each record (OUT/trials.jsonl, one JSON line per trial) holds the target, the cadence, the class,
the flip as the trial's flip log has it (read with resil.results.read_flip_log: dataset, index,
rank, step, anchor, bits, old and new bits and values), the steps and seconds from flip to repair,
whether the replicas diverged and whether rank 0's replica ended fault-free (a classification on
rank 0's state alone would have called such a trial masked), the loss difference and the exit code.
Per (target, cadence): counts per class, detection rate (repaired + detected over flips that did not
stay masked), silent escapes, median steps and seconds from flip to repair. Results: a table on
stdout, OUT/trials.jsonl, OUT/summary.json and OUT/scrub_campaign.png.

usage: scrub_campaign.py EC_TRAIN [--trials 10] [--targets row,parity,mlp,opt]
       [--cadences off,touched,sweep:4,touched+sweep:4] [--ranks 4] [--k 3] [--m 1] [--steps 30]
       [--rows 600] [--bits all] [--model flip] [--mpiexec mpiexec] [--out DIR] [--seed 1] [--no-plot]
       scrub_campaign.py EC_TRAIN --plot-only --out DIR     (the plot again from DIR/summary.json)
"""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from resil import results  # noqa: E402  (the flip-log reader)

if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
    sys.exit(__doc__)


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


EXE = os.path.abspath(sys.argv[1])
TRIALS = int(arg("--trials", "10"))
TARGETS = arg("--targets", "row,parity,mlp,opt").split(",")
CADENCES = arg("--cadences", "off,touched,sweep:4,touched+sweep:4").split(",")
RANKS, K, M, STEPS = int(arg("--ranks", "4")), int(arg("--k", "3")), int(arg("--m", "1")), int(arg("--steps", "30"))
MPIEXEC = arg("--mpiexec", "mpiexec")
OUT = os.path.abspath(arg("--out", "scrub_campaign.out"))
SEED = int(arg("--seed", "1"))
BITS, MODEL = arg("--bits", "all"), arg("--model", "flip")
ROWS = arg("--rows", "600")
SHAPE = ["--tables", "4", "--rows", ROWS, "--dim", "8", "--batch", "48", "--rows-per-fragment", "4", "--seed", "11", "--steps", str(STEPS),
         "--k", str(K), "--m", str(M), "--poll-us", "200"]


def cadence_args(c):
    if c == "off":
        return []
    if c == "touched":
        return ["--scrub"]
    mode, n = c.split(":")
    return ["--scrub", "--scrub-cadence", mode, "--scrub-sweep", n]


def run(name, extra):
    report = os.path.join(OUT, "runs", name + ".json")
    if os.path.exists(report):
        os.remove(report)
    job = f"scrub-campaign-{os.getpid()}-{name}"
    cmd = [MPIEXEC, "-n", str(RANKS), EXE, *SHAPE, "--ft", "ec", "--job-id", job, "--report", report, *extra]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600, text=True)
    if p.returncode != 0:  # a run that stopped keeps its state segments for a relaunch: none comes
        subprocess.run([MPIEXEC, "-n", str(RANKS), EXE, "--job-id", job, "--cleanup"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rep = None
    if os.path.exists(report):
        with open(report) as f:
            rep = json.load(f)
    return p.returncode, rep, p.stdout


def main():
    os.makedirs(os.path.join(OUT, "runs"), exist_ok=True)
    rc, golden, out = run("golden", [])
    if rc != 0:
        sys.exit("scrub_campaign: error: the fault-free run failed:\n" + out)
    if golden.get("replicas", {}).get("diverged"):
        sys.exit("scrub_campaign: error: the fault-free run's MLP replicas diverged: " + json.dumps(golden["replicas"]))
    print(f"scrub_campaign: {RANKS} ranks, k={K} m={M}, {STEPS} steps, {TRIALS} trials per target and cadence, --inject-bits {BITS} "
          f"--inject-model {MODEL}; golden state_hash {golden['state_hash']}, loss {golden['final_loss']:.6f}", flush=True)
    records = []
    with open(os.path.join(OUT, "trials.jsonl"), "w") as log:
        for target in TARGETS:
            for cad in CADENCES:
                for t in range(TRIALS):
                    # The step and the seed of the trial: the same trial under every cadence.
                    seed = SEED * 1000003 + TARGETS.index(target) * 1009 + t
                    step = 3 + seed % (STEPS - 8)
                    name = f"{target}-{cad.replace(':', '_').replace('+', '_')}-{t}"
                    flips = os.path.join(OUT, "runs", name + ".flips.jsonl")
                    rc, rep, out = run(name, cadence_args(cad) + ["--inject", f"{target}@{step}", "--inject-seed", str(seed),
                                                                  "--inject-bits", BITS, "--inject-model", MODEL, "--inject-log", flips])
                    rec = {"target": target, "cadence": cad, "trial": t, "seed": seed, "step": step, "exit_code": rc}
                    # The flip as its log says (a run that stopped early has no footer: its records are whole).
                    flip_log = results.read_flip_log(flips) if os.path.exists(flips) else None
                    rec["flips"] = [{"dataset": f.dataset, "index": f.index, "nd": f.nd, "rank": f.rank, "step": f.step, "dtype": f.dtype,
                                     "anchor": f.anchor, "bits": f.bits, "old": f"0x{f.old:08x}", "new": f"0x{f.new:08x}",
                                     "old_value": f.old_value, "new_value": f.new_value} for f in (flip_log.flips if flip_log else [])]
                    inj = (rep or {}).get("injections") or [{}]
                    rep_step = inj[0].get("repaired_step")
                    rec["repaired_step"] = rep_step
                    rec["flip_to_repair_steps"] = None if rep_step is None else rep_step - step
                    rec["flip_to_repair_s"] = inj[0].get("flip_to_repair_s")
                    rec["dataset"] = inj[0].get("dataset")
                    reps = (rep or {}).get("replicas") or {}
                    rec["replicas_diverged"] = reps.get("diverged")
                    # A classification on rank 0's state alone sees only this replica.
                    rec["rank0_replica_fault_free"] = None if not reps else reps["xxh64"][0] == golden["replicas"]["xxh64"][0]
                    if rc != 0:
                        rec["class"] = "detected"
                        rec["error"] = [l for l in out.splitlines() if "error" in l][:1]
                    elif rep["state_hash"] == golden["state_hash"]:
                        rec["class"] = "repaired" if rep_step is not None else "masked"
                    else:
                        rec["class"] = "escaped"
                        rec["repaired_late"] = rep_step is not None
                        rec["loss_delta"] = rep["final_loss"] - golden["final_loss"]
                    records.append(rec)
                    log.write(json.dumps(rec) + "\n")
                    log.flush()
                print(f"  {target:<7} {cad:<16} " + " ".join(f"{c}={sum(1 for r in records if r['target'] == target and r['cadence'] == cad and r['class'] == c)}"
                                                            for c in ("repaired", "masked", "escaped", "detected")), flush=True)
    summary = []
    print(f"\n{'target':<7} {'cadence':<16} {'repaired':>8} {'masked':>7} {'escaped':>8} {'detected':>9} {'detect %':>9} {'steps to repair':>16} {'s to repair':>12}")
    for target in TARGETS:
        for cad in CADENCES:
            rs = [r for r in records if r["target"] == target and r["cadence"] == cad]
            n = {c: sum(1 for r in rs if r["class"] == c) for c in ("repaired", "masked", "escaped", "detected")}
            live = len(rs) - n["masked"]
            rate = (n["repaired"] + n["detected"]) / live if live else None
            steps = [r["flip_to_repair_steps"] for r in rs if r["flip_to_repair_steps"] is not None]
            secs = [r["flip_to_repair_s"] for r in rs if r.get("flip_to_repair_s") is not None]
            row = {"target": target, "cadence": cad, "trials": len(rs), **n, "detection_rate": rate,
                   "escaped_repaired_late": sum(1 for r in rs if r.get("repaired_late")),
                   "replicas_diverged": sum(1 for r in rs if r.get("replicas_diverged")),
                   "escaped_rank0_fault_free": sum(1 for r in rs if r["class"] == "escaped" and r.get("rank0_replica_fault_free")),
                   "median_steps_to_repair": statistics.median(steps) if steps else None,
                   "median_s_to_repair": statistics.median(secs) if secs else None}
            summary.append(row)
            print(f"{target:<7} {cad:<16} {n['repaired']:>8} {n['masked']:>7} {n['escaped']:>8} {n['detected']:>9} "
                  f"{'-' if rate is None else f'{100 * rate:.0f}':>9} {'-' if not steps else statistics.median(steps):>16} "
                  f"{'-' if not secs else f'{statistics.median(secs):.4f}':>12}")
    with open(os.path.join(OUT, "summary.json"), "w") as f:
        json.dump({"ranks": RANKS, "k": K, "m": M, "steps": STEPS, "rows": int(ROWS), "trials": TRIALS, "bits": BITS, "model": MODEL,
                   "golden": golden["state_hash"], "golden_loss": golden["final_loss"], "summary": summary}, f, indent=1)
    if "--no-plot" not in sys.argv:
        plot(summary, TARGETS, CADENCES, TRIALS, f"ec-train --scrub, {RANKS} ranks, k={K} m={M}, --inject-bits {BITS} --inject-model {MODEL}")


def plot(summary, targets, cadences, trials, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("scrub_campaign: matplotlib not found: no plot")
        return
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.2))
    width = 0.8 / len(targets)
    for i, target in enumerate(targets):
        rows = [next(r for r in summary if r["target"] == target and r["cadence"] == c) for c in cadences]
        xs = [x + i * width for x in range(len(cadences))]
        ax.bar(xs, [100 * r["escaped"] / trials for r in rows], width, label=target)
        ax2.bar(xs, [r["median_steps_to_repair"] or 0 for r in rows], width, label=target)
    for a in (ax, ax2):
        a.set_xticks([x + 0.4 - width / 2 for x in range(len(cadences))])
        a.set_xticklabels(cadences)
        a.legend(ncol=len(targets), loc="upper center", fontsize="small")
    ax.set_ylim(0, 125)
    ax2.set_ylim(0, 1.3 * max([r["median_steps_to_repair"] or 0 for r in summary] + [1]))
    ax.set_ylabel("escapes (completed in another state), %")
    ax.set_title(f"one flip per run, {trials} trials per bar")
    ax2.set_ylabel("median steps from flip to repair")
    ax2.set_title("repaired flips (none repaired: no bar)")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "scrub_campaign.png"), dpi=110)


if "--plot-only" in sys.argv:  # the plot again, from OUT/summary.json
    with open(os.path.join(OUT, "summary.json")) as f:
        S = json.load(f)
    plot(S["summary"], list(dict.fromkeys(r["target"] for r in S["summary"])), list(dict.fromkeys(r["cadence"] for r in S["summary"])), S["trials"],
         f"ec-train --scrub, {S['ranks']} ranks, k={S['k']} m={S['m']}, --inject-bits {S['bits']} --inject-model {S['model']}")
else:
    main()
