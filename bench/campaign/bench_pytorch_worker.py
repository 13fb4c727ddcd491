#!/usr/bin/python3
"""Per-trial cost of a PyTorch eval campaign: the resil.trial worker ("mode": "worker") against the
same trial as a command ("mode": "command"), both against the trial function's own time.

The trial (resnet_trial.py): torch.load of a ResNet-18-shaped checkpoint (45 MB), the model built and
loaded, the first --test-images Fashion-MNIST test images through it (each size a measurement); one flip per trial in the
model's tensors, classified on test accuracy and test loss. The same campaign runs in each mode twice,
with --max-trials SMALL and LARGE, in separate directories: the difference of the two runs' costs
divided by LARGE - SMALL is the cost of one trial, without the one-time costs (the campaign's start,
the worker's import of torch and the data, the golden summary, which is given). Costs are wall
seconds and CPU seconds of the whole process tree (the campaign, its job, the worker, each trial;
getrusage of the waited-for children, so a loaded machine inflates the wall times, not the CPU
times). The function's own time is what evaluate() measures around its body, averaged over the
trials the difference counts; the warm loop calls evaluate() again and again in one process (torch
imported, data loaded, after a warm-up call), as a PyTorch user would time it, alternating with a call
in a forked child of that process (a worker's trial without resil: what a fresh address space costs).
Goal: the worker's per-trial cost within 10 % of the function's own time. The records of the two
modes are compared trial by trial (class, metric, per-metric values).

    bench_pytorch_worker.py CKPT-FLIP [--trials 22] [--command-trials 6] [--test-images 300,1000] [--out DIR] [--json F]
"""
import argparse
import glob
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRIAL = os.path.join(HERE, "resnet_trial.py")
PY = "/usr/bin/python3"


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd, env):
    c0, t0 = children_cpu(), time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0, children_cpu() - c0


def records(out):
    recs = {}
    for f in glob.glob(out + "/results/*.jsonl"):
        for line in open(f):
            r = json.loads(line)
            recs[r["trial"]] = r
    return recs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("flip")
    ap.add_argument("--trials", type=int, default=22, help="LARGE of the worker runs (SMALL is 2)")
    ap.add_argument("--command-trials", type=int, default=6, help="LARGE of the command runs (SMALL is 1)")
    ap.add_argument("--test-images", default="300,1000", help="test images per evaluation, a comma-separated list: one measurement each")
    ap.add_argument("--warm-calls", type=int, default=10, help="rounds of the warm loop (after one warm-up call): a call in the process and one in a forked child")
    ap.add_argument("--out", help="keep the campaigns here (default: a temporary directory, removed)")
    ap.add_argument("--json", help="write the numbers here")
    a = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: /usr/bin/python3 cannot import torch")
        return 77
    top = a.out or tempfile.mkdtemp(prefix="bench-pytorch-worker-")
    results = {}
    try:
        for images in map(int, a.test_images.split(",")):
            results[images] = measure(a, images, os.path.join(top, f"images-{images}"), os.path.join(top, "golden.pt"))
        if a.json:
            json.dump({"load_average": os.getloadavg(), "cpus": os.cpu_count(), "by_test_images": results}, open(a.json, "w"), indent=1)
        return 0
    finally:
        if not a.out:
            shutil.rmtree(top, ignore_errors=True)


def measure(a, images, work, golden):
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, RESIL_BENCH_TEST_IMAGES=str(images), PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
    if not os.path.exists(golden):
        subprocess.run([PY, TRIAL, "train", "--out", golden, "--steps", "40"], check=True, env=env)
    gsum = os.path.join(work, "golden-summary.json")
    subprocess.run([PY, TRIAL, "eval", "--from", golden, "--out", gsum], check=True, env=env, stdout=subprocess.DEVNULL)
    g = json.load(open(gsum))
    print(f"golden {golden} ({os.path.getsize(golden) / 1e6:.1f} MB, training seed 7): test_accuracy {g['test_accuracy']:.4f}, "
          f"test_loss {g['test_loss']:.4f} on {images} test images; campaign seed 11, 1 flip per trial in the model's tensors", flush=True)
    # The function in one warm process (torch imported, the data loaded, a first call done): the
    # evaluation as a PyTorch user times it in a notebook.
    warm = json.loads(subprocess.run([PY, TRIAL, "loop", "--from", golden, "--n", str(a.warm_calls)], check=True, env=env,
                                     stdout=subprocess.PIPE, text=True).stdout)
    runs = {}
    for mode, small, large in (("worker", 2, a.trials), ("command", 1, a.command_trials), ("empty", 2, a.trials)):
        cfg = os.path.join(work, f"{mode}.json")
        json.dump({"name": "resnet18-eval", "checkpoint": golden, "golden": {"summary": gsum}, "mode": "command" if mode == "command" else "worker",
                   "command": [PY, TRIAL, "eval", "--from", "{ckpt}", "--out", "{out}"],
                   "trials": 1000, "seed": 11, "timeout_s": 600, "inject": {"flips": 1, "role": "model"},
                   "metrics": [{"name": "test_accuracy", "tolerance": 0.01},
                               {"name": "test_loss", "tolerance": 0.05, "higher_is_better": False}]}, open(cfg, "w"))
        cost = {}
        for n in (small, large):
            out = os.path.join(work, f"{mode}-{n}")
            shutil.rmtree(out, ignore_errors=True)
            times = os.path.join(work, f"{mode}-{n}.times")
            if os.path.exists(times):
                os.unlink(times)
            wall, cpu = timed([a.flip, "campaign", cfg, "--out", out, "--jobs", "1", "--max-trials", str(n), "-q"],
                              dict(env, RESIL_BENCH_TIMES=times, **({"RESIL_BENCH_EMPTY": gsum} if mode == "empty" else {})))
            fn = [tuple(map(float, line.split())) for line in open(times)]
            assert len(fn) == n, f"{mode}: {len(fn)} function times for {n} trials"
            cost[n] = (wall, cpu, fn, records(out))
        (w1, c1, _, _), (w2, c2, fn, recs) = cost[small], cost[large]
        fn = fn[small:]  # the function's own time in the trials the difference counts (trials run in order: --jobs 1)
        runs[mode] = {"trials": large, "small": small, "trial_wall": (w2 - w1) / (large - small), "trial_cpu": (c2 - c1) / (large - small),
                      "function_wall": statistics.mean(f[0] for f in fn), "function_cpu": statistics.mean(f[1] for f in fn),
                      "function_cpu_stdev": statistics.stdev(f[1] for f in fn) if len(fn) > 1 else 0.0,
                      "campaign_wall": w2, "campaign_cpu": c2, "records": recs}
    # The same records trial by trial: what a trial computes does not depend on how it ran.
    same = ("class", "metric", "delta", "flips", "metrics", "exit_code", "signal", "injected_nonfinite", "trial_seed")
    wr, cr = runs["worker"]["records"], runs["command"]["records"]
    for t in cr:
        assert {k: cr[t].get(k) for k in same} == {k: wr[t].get(k) for k in same}, f"trial {t}: command {cr[t]} != worker {wr[t]}"
    classes = sorted(r["class"] for r in wr.values())
    print(f"ResNet-18-shaped eval on {images} Fashion-MNIST test images, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}; per trial = (cost of LARGE - cost of SMALL trials) / (LARGE - SMALL)")
    print(f"{'mode':10}{'trials':>8}{'trial wall s':>14}{'trial CPU s':>13}{'fn wall s':>11}{'fn CPU s':>10}{'wall/fn':>9}{'CPU/fn':>8}")
    for mode, r in runs.items():
        if mode == "empty":
            print(f"{'empty fn':10}{r['small']:>3}..{r['trials']:<3}{r['trial_wall']:>14.3f}{r['trial_cpu']:>13.3f}   "
                  "(worker mode, the function returns the golden metrics: what resil adds per trial)")
            continue
        r["wall_ratio"] = r["trial_wall"] / r["function_wall"]
        r["cpu_ratio"] = r["trial_cpu"] / r["function_cpu"]
        print(f"{mode:10}{r['small']:>3}..{r['trials']:<3}{r['trial_wall']:>14.3f}{r['trial_cpu']:>13.3f}{r['function_wall']:>11.3f}"
              f"{r['function_cpu']:>10.3f}{r['wall_ratio']:>9.3f}{r['cpu_ratio']:>8.3f}")
    print(f"{'warm loop':10}{a.warm_calls:>8}{'':>14}{'':>13}{warm['wall']:>11.3f}{warm['cpu']:>10.3f}   (evaluate() called again and again in one process)")
    print(f"{'  forked':10}{a.warm_calls:>8}{'':>14}{'':>13}{warm['forked_wall']:>11.3f}{warm['forked_cpu']:>10.3f}   "
          f"(each round's second call in a forked child of that process: CPU {(warm['forked_cpu'] / warm['cpu'] - 1) * 100:+.1f} %)")
    w, c, e = runs["worker"], runs["command"], runs["empty"]
    w["warm_wall_ratio"], w["warm_cpu_ratio"] = w["trial_wall"] / warm["wall"], w["trial_cpu"] / warm["cpu"]
    print(f"worker per trial vs the warm loop's call: wall {(w['warm_wall_ratio'] - 1) * 100:+.1f} %, CPU {(w['warm_cpu_ratio'] - 1) * 100:+.1f} %")
    print(f"worker vs command per trial: {c['trial_wall'] / w['trial_wall']:.2f}x less wall, {c['trial_cpu'] / w['trial_cpu']:.2f}x less CPU; "
          f"records equal for trials 0..{len(cr) - 1}; worker classes: {' '.join(f'{k} {classes.count(k)}' for k in sorted(set(classes)))}")
    for ref, ratio in (("the function's own in the trial", w["cpu_ratio"]), ("the warm loop's call", w["warm_cpu_ratio"])):
        print(f"goal (worker per-trial CPU within 10 % of {ref}): {'met' if ratio <= 1.10 else 'NOT met'} ({(ratio - 1) * 100:+.1f} %)")
    print(f"worker per-trial CPU {w['trial_cpu']:.3f} s = the function in the trial {w['function_cpu']:.3f} + the rest {w['trial_cpu'] - w['function_cpu']:.3f} "
          f"(of which resil's own work with an empty function {e['trial_cpu']:.3f}); the function in the trial vs in the warm loop: "
          f"{(w['function_cpu'] / warm['cpu'] - 1) * 100:+.1f} %")
    print()
    for r in runs.values():
        r.pop("records")
    runs["warm_loop"] = dict(warm, calls=a.warm_calls)
    return runs


if __name__ == "__main__":
    sys.exit(main())
