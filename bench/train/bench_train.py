#!/usr/bin/python3
"""Epoch time of ckpt-train's MLP and CNN against PyTorch on the CPU, same architecture, batch,
optimizer and thread count, measured in the same run; prints both and the ratio.

  bench_train.py CKPT_TRAIN [--samples N] [--threads T] [--models mlp,cnn] [--baseline OTHER_CKPT_TRAIN]

ckpt-train: `train --epochs 1 --limit N --threads T`, its metrics' epoch_seconds (training steps
plus a 10-sample evaluation and one checkpoint write). PyTorch: torch.set_num_threads(T), the
same layers (MLP 784-256-128-10; LeNet-5 style CNN conv5x5 1->6 pad 2, pool, conv5x5 6->16, pool,
400-120-84-10), Adam lr 1e-3, batch 64, the same N Fashion-MNIST samples, time of the training loop.
Ratio = ckpt-train / PyTorch (< 1: ckpt-train faster). Best of --repeat runs each. --baseline
times another ckpt-train binary (e.g. an earlier build) in the same run and prints its ratio too.
The environment (OPENBLAS_CORETYPE, thread variables) is the same for every program measured.
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ap = argparse.ArgumentParser()
ap.add_argument("ckpt_train")
ap.add_argument("--samples", type=int, default=int(os.environ.get("RESIL_BENCH_TRAIN_SAMPLES", "12800")))
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--models", default="mlp,cnn")
ap.add_argument("--repeat", type=int, default=2)
ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
ap.add_argument("--baseline", help="another ckpt-train binary to time in the same run")
a = ap.parse_args()

def ours(model, exe=None):
    exe = exe or a.ckpt_train
    best = float("inf")
    for _ in range(a.repeat):
        d = tempfile.mkdtemp(prefix="bench_train_")
        try:
            subprocess.run([exe, "train", "--model", model, "--epochs", "1", "--seed", "1", "--limit", str(a.samples),
                            "--test-limit", "10", "--batch", str(a.batch), "--threads", str(a.threads), "--optimizer", "adam",
                            "--lr", "1e-3", "--ckpt-dir", os.path.join(d, "c"), "--metrics", os.path.join(d, "m.jsonl")],
                           check=True, stdout=subprocess.DEVNULL)
            best = min(best, json.loads(open(os.path.join(d, "m.jsonl")).readline())["epoch_seconds"])
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return best

def torch_epoch(model):
    import torch
    from torch import nn
    import reference_nets
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    x, y = reference_nets.fashion_mnist(a.data, model, a.samples, "bench_train")
    net = reference_nets.mlp() if model == "mlp" else reference_nets.cnn()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    best = float("inf")
    for _ in range(a.repeat):
        perm = torch.randperm(a.samples)
        t0 = time.perf_counter()
        for s in range(a.samples // a.batch):
            i = perm[s * a.batch:(s + 1) * a.batch]
            opt.zero_grad()
            loss = loss_fn(net(x[i]), y[i])
            loss.backward()
            opt.step()
        best = min(best, time.perf_counter() - t0)
    return best

print(f"bench_train: {a.samples} samples ({a.samples // a.batch} steps of {a.batch}), {a.threads} thread(s), best of {a.repeat}, "
      f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
print(f"{'model':6s} {'ckpt-train s':>13s} {'pytorch s':>10s} {'ratio':>7s}  (ratio = ckpt-train / pytorch; goal <= 1)"
      + (f"  baseline {a.baseline}" if a.baseline else ""))
worst = 0.0
for m in a.models.split(","):
    t_ours, t_torch = ours(m), torch_epoch(m)
    r = t_ours / t_torch
    worst = max(worst, r)
    extra = ""
    if a.baseline:
        t_base = ours(m, a.baseline)
        extra = f"   baseline {t_base:.2f} s, {t_base / t_torch:.2f}x"
    print(f"{m:6s} {t_ours:13.2f} {t_torch:10.2f} {r:7.2f}x   full epoch (60000): {t_ours * 60000 / a.samples:.1f} s vs "
          f"{t_torch * 60000 / a.samples:.1f} s{extra}", flush=True)
print(f"bench_train: worst ratio {worst:.2f}x ({'goal met' if worst <= 1.0 else 'slower than PyTorch'})")
