#!/usr/bin/python3
"""A fault-injection campaign of in-memory flips against ec-train (CTest scrub_campaign, label perf;
ec_train_scrub_campaign runs a small one), one `ckpt-flip campaign` of kind ec-train per scrub cadence
(docs/reference/campaign.md, "Kind ec-train"): each trial is one ec-train run with one --inject flip
(the step drawn from the trial's seed, the rank, the word and the bit by ec-train from the same seed;
--bits and --model as ckpt-flip inject's), classified against the fault-free run of the same
configuration (its state_hash, which covers every rank's MLP replica and Adam state, and its final
loss). Every cadence's campaign has the same seed, so trial t flips the same word under each. Targets:
row (a shard row: weights or Adagrad accumulators), parity (a parity row), mlp (an MLP replica's
parameter), opt (its Adam state); trial t of a campaign injects into targets[t mod n]. Cadences: off
(--ft ec without --scrub), touched (the default --scrub), sweep:S (--scrub-cadence sweep, S stripes
per step) and touched+sweep:S.

Classes of a trial, from its campaign record:
  repaired   bit_masked, and the scrub repaired the flipped row (the run ended in the fault-free state)
  masked     bit_masked without any repair (the flipped bits were overwritten unread)
  escaped    masked, tolerable_sdc or critical_sdc: the run completed in another state (a silent
             escape: the flip was trained on), with `repaired_late` when the scrub repaired the row
             after the flip had already been read, and `replicas_diverged` when the ranks' MLP replicas
             ended different
  detected   the run stopped with an error (detected: exit 8, a codeword beyond repair or parity
             found different from the data at the end, which --ft ec checks without --scrub too;
             crash, hang)
Each record (OUT/trials.jsonl, one JSON line per trial) holds the target, the cadence, the class,
the flip as the campaign record has it (from the trial's flip log: dataset, index, rank, step, bit,
old and new bits and values), the steps and seconds from flip to repair, whether the replicas
diverged and whether rank 0's replica ended fault-free (a classification on rank 0's state alone
would have called such a trial masked), the loss difference and the exit code.
Per (target, cadence): counts per class, detection rate (repaired + detected over flips that did not
stay masked), silent escapes, median steps and seconds from flip to repair. Results: a table on
stdout, OUT/trials.jsonl, OUT/summary.json and OUT/scrub_campaign.png; the campaign directories in
OUT/campaigns/<cadence> (`ckpt-flip report` reads them; a second run continues them).

usage: scrub_campaign.py EC_TRAIN [--ckpt-flip PATH (default: beside EC_TRAIN)] [--trials 10]
       [--targets row,parity,mlp,opt] [--cadences off,touched,sweep:4,touched+sweep:4] [--ranks 4]
       [--k 3] [--m 1] [--steps 30] [--rows 600] [--bits all] [--model flip] [--mpiexec mpiexec]
       [--out DIR] [--seed 1] [--no-plot]
       scrub_campaign.py EC_TRAIN --plot-only --out DIR     (the plot again from DIR/summary.json)
"""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from resil import results  # noqa: E402  (the campaign reader)

if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
    sys.exit(__doc__)


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


EXE = os.path.abspath(sys.argv[1])
FLIP = os.path.abspath(arg("--ckpt-flip", os.path.join(os.path.dirname(EXE), "ckpt-flip")))
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


def campaign(cad):
    """The campaign of one cadence (continued if OUT holds it): its golden record and its records."""
    name = cad.replace(":", "_").replace("+", "_")
    cdir = os.path.join(OUT, "campaigns", name)
    cfg = {"name": f"scrub-{name}", "kind": "ec-train", "trials": TRIALS * len(TARGETS), "seed": SEED, "timeout_s": 600,
           "command": [MPIEXEC, "-n", str(RANKS), EXE, *SHAPE, "--ft", "ec", *cadence_args(cad), "--report", "{out}"],
           "inject": {"targets": TARGETS, "steps": [3, STEPS - 6], "bits": BITS, "model": MODEL},
           "detected_codes": [8]}
    os.makedirs(os.path.join(OUT, "campaigns"), exist_ok=True)
    with open(cdir + ".json", "w") as f:
        json.dump(cfg, f, indent=1)
    p = subprocess.run([FLIP, "campaign", cdir + ".json", "--out", cdir, "--jobs", "1", "--quiet"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"scrub_campaign: error: ckpt-flip campaign of cadence {cad} failed (exit {p.returncode}):\n" + p.stdout[-3000:])
    c = results.read_campaign(cdir)
    golden = c.golden["summary"]
    if golden.get("replicas", {}).get("diverged"):
        sys.exit("scrub_campaign: error: the fault-free run's MLP replicas diverged: " + json.dumps(golden["replicas"]))
    return golden, c.records


def record(r, cad, golden):
    """A campaign record in this benchmark's terms."""
    e = r["ec_train"]
    target, step = e["inject"].split("@")
    rec = {"target": target, "cadence": cad, "trial": r["trial"] // len(TARGETS), "seed": r["trial_seed"], "step": int(step),
           "exit_code": r["exit_code"], "flips": r["flips"]}
    inj = (e.get("injections") or [{}])[0]
    rep_step = inj.get("repaired_step")
    rec["repaired_step"] = rep_step
    rec["flip_to_repair_steps"] = None if rep_step is None else rep_step - rec["step"]
    rec["flip_to_repair_s"] = inj.get("flip_to_repair_s")
    rec["dataset"] = inj.get("dataset")
    rec["replicas_diverged"] = e.get("replicas_diverged")
    # A classification on rank 0's state alone sees only this replica.
    reps = e.get("replicas_xxh64")
    rec["rank0_replica_fault_free"] = None if not reps else reps[0] == golden["replicas"]["xxh64"][0]
    if r["class"] in ("detected", "crash", "hang"):
        rec["class"] = "detected"
        rec["error"] = [line for line in (r.get("output_tail") or "").splitlines() if "error" in line][:1]
    elif r["class"] == "bit_masked":
        rec["class"] = "repaired" if rep_step is not None else "masked"
    else:
        rec["class"] = "escaped"
        rec["repaired_late"] = rep_step is not None
        rec["loss_delta"] = r["delta"]
    return rec


def main():
    os.makedirs(OUT, exist_ok=True)
    print(f"scrub_campaign: {RANKS} ranks, k={K} m={M}, {STEPS} steps, {TRIALS} trials per target and cadence, --inject-bits {BITS} "
          f"--inject-model {MODEL}, one ckpt-flip campaign per cadence in {os.path.join(OUT, 'campaigns')}", flush=True)
    records, goldens = [], {}
    for cad in CADENCES:
        golden, recs = campaign(cad)
        goldens[cad] = golden
        records += [record(r, cad, golden) for r in recs]
        for target in TARGETS:
            print(f"  {target:<7} {cad:<16} " + " ".join(f"{c}={sum(1 for r in records if r['target'] == target and r['cadence'] == cad and r['class'] == c)}"
                                                        for c in ("repaired", "masked", "escaped", "detected")), flush=True)
    records.sort(key=lambda r: (TARGETS.index(r["target"]), CADENCES.index(r["cadence"]), r["trial"]))
    with open(os.path.join(OUT, "trials.jsonl"), "w") as log:
        for r in records:
            log.write(json.dumps(r) + "\n")
    golden = goldens[CADENCES[0]]
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
