#!/usr/bin/python3
"""Campaign throughput (docs/performance.md): the demo's eval campaign (ckpt-train eval
on 2,000 test samples) and a 1-epoch resume campaign (12,000 training samples), the same trials, run
(a) "mode": "command", --jobs 1; (b) "mode": "worker", --jobs 1; (c) worker, --jobs = cores; and
(d) the seed study's way: one Python process per trial, element-wise flip with h5py, PyTorch.
Prints trials per hour, the ratios, and each mode's overhead per trial: the campaign's wall time
per trial (times the jobs) minus the time the trial itself reports (the summary's wall_seconds of
the same command on the golden checkpoint: the resume trials flip low mantissa bits only, so every
trial computes the whole epoch, as the golden run does).
    bench_campaign.py CKPT-FLIP CKPT-TRAIN [--eval-trials N] [--resume-trials N] [--out DIR]"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(*cmd, **kw):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)


def campaign(flip, cfg, out, jobs):
    t0 = time.perf_counter()
    sh(flip, "campaign", cfg, "--out", out, "--jobs", str(jobs), "-q")
    wall = time.perf_counter() - t0
    return wall, [json.loads(l) for f in glob.glob(out + "/results/*.jsonl") for l in open(f)]


def torch_way(kind, ckpt, trials, work):
    t0 = time.perf_counter()
    reported = []
    for t in range(trials):
        out = os.path.join(work, "summary.json")
        sh("/usr/bin/python3", os.path.join(HERE, "torch_trial.py"), kind, ckpt, str(t), work, out)
        reported.append(json.load(open(out))["wall_seconds"])
    return time.perf_counter() - t0, sum(reported) / len(reported)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("flip")
    ap.add_argument("train")
    ap.add_argument("--eval-trials", type=int, default=48)
    ap.add_argument("--resume-trials", type=int, default=8)
    ap.add_argument("--out")
    a = ap.parse_args()
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
        print("bench_campaign: PyTorch not installed (python3-torch, scripts/setup.sh): baseline (d) skipped")
    cores = os.cpu_count() or 1
    d = a.out or tempfile.mkdtemp(prefix="bench-campaign-")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    train = os.path.abspath(a.train)
    # The demo's golden model: 1 epoch on 12,000 samples, seed 7.
    sh(train, "train", "--model", "mlp", "--epochs", "1", "--seed", "7", "--limit", "12000", "--ckpt-dir", d + "/ck")
    ckpt = subprocess.run([train, "latest", "--ckpt-dir", d + "/ck"], check=True, capture_output=True, text=True).stdout.strip()
    kinds = {
        "eval": (a.eval_trials, [train, "eval", "--from", "{ckpt}", "--summary", "{out}", "--test-limit", "2000"]),
        "resume": (a.resume_trials, [train, "resume", "--from", "{ckpt}", "--epochs", "2", "--ckpt-dir", "{dir}", "--summary", "{out}"]),
    }
    print(f"bench_campaign: {cores} cores, load average {os.getloadavg()[0]:.2f} at the start; golden {ckpt}")
    results = {}
    for kind, (trials, command) in kinds.items():
        golden = f"{d}/golden-{kind}.json"
        gargs = [a if a not in ("{ckpt}", "{out}", "{dir}") else {"{ckpt}": ckpt, "{out}": golden, "{dir}": d + "/gdir"}[a] for a in command]
        reported = []
        for _ in range(3):  # the golden run's own time (the median of three): what a trial reports
            sh(*gargs)
            reported.append(json.load(open(golden))["wall_seconds"])
        reported = sorted(reported)[1]
        rows = {}
        for label, mode, jobs in (("a", "command", 1), ("b", "worker", 1), ("c", "worker", cores)):
            cfg = f"{d}/{kind}-{mode}.json"
            json.dump({"name": f"bench-{kind}", "checkpoint": ckpt, "command": command, "mode": mode, "trials": trials, "seed": 2024,
                       "timeout_s": 600, "golden": {"summary": golden}, "inject": {"flips": 1, "role": "model", "strata": "field"} if kind == "eval" else {"flips": 1, "role": "model", "bits": "0-15"},
                       "metric": "test_accuracy", "tolerance": 0.01}, open(cfg, "w"))
            wall, recs = campaign(a.flip, cfg, f"{d}/out-{kind}-{label}", jobs)
            rows[label] = {"mode": f"{mode}, --jobs {jobs}", "wall_s": wall, "trials_per_hour": trials * 3600 / wall,
                           "reported_s": reported, "overhead_s": wall * jobs / trials - reported,
                           "classes": sorted((r["trial"], r["class"]) for r in recs)}
        assert rows["a"]["classes"] == rows["b"]["classes"] == rows["c"]["classes"], f"{kind}: modes disagree"
        if have_torch:
            os.makedirs(d + "/torch", exist_ok=True)
            wall, treported = torch_way(kind, ckpt, trials, d + "/torch")
            rows["d"] = {"mode": "Python + h5py + PyTorch, one process per trial", "wall_s": wall, "trials_per_hour": trials * 3600 / wall,
                         "reported_s": treported, "overhead_s": wall / trials - treported}
        print(f"\n{kind}: {trials} trials")
        print(f"  {'':2} {'mode':48} {'wall s':>8} {'trials/h':>10} {'reported s':>11} {'overhead s':>11}")
        for label, r in rows.items():
            print(f"  ({label}) {r['mode']:48} {r['wall_s']:8.2f} {r['trials_per_hour']:10.0f} {r['reported_s']:11.4f} {r['overhead_s']:11.4f}")
        tph = {k: v["trials_per_hour"] for k, v in rows.items()}
        print(f"  (b)/(a) {tph['b'] / tph['a']:.1f}x   (c)/(b) {tph['c'] / tph['b']:.2f}x on {cores} cores" +
              (f"   (c)/(d) {tph['c'] / tph['d']:.1f}x" if "d" in tph else ""))
        if kind == "resume":
            print(f"  overhead per resume trial (b): {100 * rows['b']['overhead_s'] / rows['b']['reported_s']:.1f} % of its reported time")
        for r in rows.values():
            r.pop("classes", None)
        results[kind] = rows
    json.dump({"cores": cores, "results": results}, open(d + "/bench.json", "w"), indent=2)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end; {d}/bench.json")


if __name__ == "__main__":
    sys.exit(main())
