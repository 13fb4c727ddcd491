"""Step time of ckpt-train on CUDA against PyTorch on the same GPU: MLP, CNN and DLRM with the
same layers, batch and optimizer, measured in the same run; prints both and the ratio.
Labels perf;gpu. Exit 77 (skipped) when ckpt-train has no usable GPU or torch.cuda is unavailable.

  bench_train_gpu.py CKPT_TRAIN [--batch 128] [--steps 50,250] [--models mlp,cnn,dlrm] [--repeat 2]

Interpreter: bench_train_gpu.sh runs this with $RESIL_BENCH_PYTHON (default /usr/bin/python3), so
a GPU machine can point it at the python that has a CUDA build of torch.

ckpt-train (`train --device cuda --reduce host`, one process): two runs of 2 epochs with S1 and S2
steps per epoch; the step time is (t2(S2) - t2(S1)) / (S2 - S1), where t2 is the metrics'
epoch_seconds of epoch 2. Epoch 1 (CUDA context, cuBLAS and lazy kernel loading) is the warm-up and
excluded; the difference cancels what every epoch pays once (evaluation of 10 test samples, one
checkpoint write). A ckpt-train step gathers the batch in host memory, uploads it, runs forward,
backward and the optimizer, and reads the loss and a finite-weights flag back to the host.
PyTorch: the same per-step work -- batch indexed from host tensors and copied to the GPU, forward,
backward, optimizer step, loss.item() -- after W = 20 warm-up steps, S2 - S1 steps timed between
torch.cuda.synchronize() calls; TF32 is off (ckpt-train's cuBLAS runs in pedantic FP32).
Models: MLP 784-256-128-10 (Adam 1e-3); CNN conv5x5 1->6 pad 2, pool, conv5x5 6->16, pool,
400-120-84-10 (Adam 1e-3); DLRM 13 dense features -> 64 -> 16, 26 EmbeddingBag(1000, 16, sum) with
one index per table, pairwise dot interaction (27 vectors: 16 + 351 features), 367 -> 64 -> 1,
BCE with logits (Adagrad 0.05; PyTorch updates the embedding tables densely, ckpt-train only the
touched rows). Data: Fashion-MNIST for MLP/CNN, synthetic clicks for DLRM (random on the PyTorch side).
Ratio = ckpt-train / PyTorch (< 1: ckpt-train faster); goal <= 1.2. Best of --repeat runs each.
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ap = argparse.ArgumentParser()
ap.add_argument("ckpt_train")
ap.add_argument("--batch", type=int, default=128)
ap.add_argument("--steps", default="50,250", help="S1,S2 steps per epoch of the two ckpt-train runs")
ap.add_argument("--models", default="mlp,cnn,dlrm")
ap.add_argument("--repeat", type=int, default=2)
ap.add_argument("--warmup", type=int, default=20)
ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
a = ap.parse_args()
s1, s2 = (int(x) for x in a.steps.split(","))
if not 0 < s1 < s2:
    sys.exit("bench_train_gpu: --steps S1,S2 with 0 < S1 < S2")

def skip(why):
    print(f"bench_train_gpu: skipped: {why}")
    sys.exit(77)

# ---- is there a GPU on both sides?
tmp = tempfile.mkdtemp(prefix="bench_gpu_")
probe = subprocess.run([a.ckpt_train, "train", "--model", "mlp", "--seed", "1", "--limit", "64", "--test-limit", "10",
                        "--epochs", "1", "--device", "auto", "--ckpt-dir", os.path.join(tmp, "probe"),
                        "--summary", os.path.join(tmp, "probe.json")], capture_output=True, text=True)
dev = json.load(open(os.path.join(tmp, "probe.json"))).get("device", "") if probe.returncode == 0 else ""
if not dev.startswith("cuda"):
    skip(f"ckpt-train has no usable GPU (auto chose {dev!r})")
try:
    import torch
    from torch import nn
    import reference_nets
except ImportError as e:
    skip(f"no torch in {sys.executable}: {e}")
if not torch.cuda.is_available():
    skip(f"torch {torch.__version__} in {sys.executable} has no usable CUDA device")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
gpu = torch.device("cuda")

# ---- ckpt-train
def epoch2_seconds(model, steps):
    n = steps * a.batch
    best = float("inf")
    for _ in range(a.repeat):
        d = tempfile.mkdtemp(prefix="bench_gpu_run_")
        try:
            args = [a.ckpt_train, "train", "--model", model, "--epochs", "2", "--seed", "1", "--test-limit", "10",
                    "--batch", str(a.batch), "--device", "cuda", "--reduce", "host", "--lr-decay", "1",
                    "--ckpt-dir", os.path.join(d, "c"), "--metrics", os.path.join(d, "m.jsonl")]
            if model == "dlrm":
                args += ["--optimizer", "adagrad", "--lr", "0.05", "--synthetic-samples", str(n)]
            else:
                args += ["--optimizer", "adam", "--lr", "1e-3", "--limit", str(n)]
            subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
            lines = [json.loads(l) for l in open(os.path.join(d, "m.jsonl")) if l.strip()]
            best = min(best, lines[1]["epoch_seconds"])
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return best

def ours(model):
    return (epoch2_seconds(model, s2) - epoch2_seconds(model, s1)) / (s2 - s1)

# ---- PyTorch
def torch_step_time(model):
    torch.manual_seed(1)
    steps = s2 - s1
    n = (steps + a.warmup) * a.batch
    if model == "dlrm":
        net = reference_nets.Dlrm().to(gpu)
        net.li, net.lj = net.li.to(gpu), net.lj.to(gpu)
        g = torch.Generator().manual_seed(1)
        dense = torch.rand(n, 13, generator=g)
        sparse = torch.randint(0, 1000, (n, 26), generator=g)
        y = torch.randint(0, 2, (n,), generator=g).float()
        opt = torch.optim.Adagrad(net.parameters(), lr=0.05)
        loss_fn = nn.BCEWithLogitsLoss()
        batch = lambda i: ((dense[i].to(gpu), sparse[i].to(gpu)), y[i].to(gpu))
    else:
        x, y = reference_nets.fashion_mnist(a.data, model, n, "bench_train_gpu")
        net = reference_nets.mlp() if model == "mlp" else reference_nets.cnn()
        net = net.to(gpu)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
        batch = lambda i: ((x[i].to(gpu),), y[i].to(gpu))
    best = float("inf")
    for _ in range(a.repeat):
        perm = torch.randperm(n)
        def step(s):
            inp, tgt = batch(perm[s * a.batch:(s + 1) * a.batch])
            opt.zero_grad()
            loss = loss_fn(net(*inp), tgt)
            loss.backward()
            opt.step()
            return loss.item()
        for s in range(a.warmup):
            step(s)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for s in range(a.warmup, a.warmup + steps):
            step(s)
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / steps)
    return best

print(f"bench_train_gpu: ckpt-train {dev}; torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
print(f"batch {a.batch}, ckpt-train epochs of {s1} and {s2} steps (epoch 2 of each), PyTorch {s2 - s1} steps after "
      f"{a.warmup} warm-up steps, best of {a.repeat}")
print(f"{'model':6s} {'ckpt-train ms/step':>19s} {'pytorch ms/step':>16s} {'ratio':>7s}  (ratio = ckpt-train / pytorch; goal <= 1.2)")
worst = 0.0
for m in a.models.split(","):
    t_ours, t_torch = ours(m), torch_step_time(m)
    r = t_ours / t_torch
    worst = max(worst, r)
    print(f"{m:6s} {t_ours * 1e3:19.3f} {t_torch * 1e3:16.3f} {r:7.2f}x", flush=True)
shutil.rmtree(tmp, ignore_errors=True)
print(f"bench_train_gpu: worst ratio {worst:.2f}x ({'goal met' if worst <= 1.2 else 'goal (1.2x) not met'})")
