#!/usr/bin/python3
"""Step time of ckpt-train's GPT against PyTorch on the CPU or one GPU: the same model, batch,
optimizer and thread count, measured in the same run; prints both and the ratio.

  bench_gpt.py CKPT_TRAIN [--layers L --heads H --width C --context T --batch B] [--steps N]
               [--threads T] [--repeat R] [--precision fp32|bf16|both] [--device cpu|cuda]

ckpt-train: `train --model gpt --epochs 1 --limit B*N` on Debian's fortunes, the metrics'
train_seconds (the N training steps alone) / N. PyTorch: torch.set_num_threads(T); a GPT-2 module
with the same layers and sizes (nn.Linear, F.layer_norm, F.gelu(approximate="tanh"), causal
softmax attention written out as ckpt-train computes it, the LM head tied to the token
embedding), AdamW (decay 0.1 on matrices), clip_grad_norm_(1.0), the same windows; the mean time of
N steps after 2 warm-up steps. bf16: ckpt-train --precision bf16 against torch.autocast("cpu",
dtype=torch.bfloat16) around the forward pass. --device cuda: ckpt-train --device cuda against
the module on torch's first GPU (autocast("cuda") for bf16, torch.cuda.synchronize() around each
step; TF32 off, as ckpt-train's cuBLAS runs pedantic FP32); exit 77 without torch.cuda. Ratio =
ckpt-train / PyTorch (< 1: ckpt-train faster). Best of --repeat runs each.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("ckpt_train")
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--heads", type=int, default=4)
ap.add_argument("--width", type=int, default=256)
ap.add_argument("--context", type=int, default=128)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--steps", type=int, default=int(os.environ.get("RESIL_BENCH_GPT_STEPS", "10")))
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--repeat", type=int, default=2)
ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "both"])
ap.add_argument("--data", default="/usr/share/games/fortunes")
ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
a = ap.parse_args()
if a.device == "cuda":
    try:
        import torch
        ok = torch.cuda.is_available()
    except ImportError:
        ok = False
    if not ok:
        print(f"bench_gpt: no torch.cuda in {sys.executable}: skipped")
        sys.exit(77)
SIZE = ["--layers", str(a.layers), "--heads", str(a.heads), "--width", str(a.width), "--context", str(a.context)]


def ours(precision):
    best = float("inf")
    for _ in range(a.repeat):
        d = tempfile.mkdtemp(prefix="bench_gpt_")
        try:
            cmd = [a.ckpt_train, "train", "--model", "gpt", *SIZE, "--epochs", "1", "--seed", "1", "--limit", str(a.batch * a.steps),
                   "--test-limit", str(a.batch), "--batch", str(a.batch), "--threads", str(a.threads), "--ckpt-dir", os.path.join(d, "c"),
                   "--metrics", os.path.join(d, "m.jsonl")]
            if precision != "fp32":
                cmd += ["--precision", precision]
            if a.device != "cpu":
                cmd += ["--device", a.device]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            best = min(best, json.loads(open(os.path.join(d, "m.jsonl")).readline())["train_seconds"] / a.steps)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return best


def windows():
    """The first batch * steps training windows of the corpus, split as resil::data::load_text splits it."""
    names = sorted(f for f in os.listdir(a.data)
                   if not f.endswith(".dat") and os.path.isfile(os.path.join(a.data, f + ".dat"))
                   and not os.path.islink(os.path.join(a.data, f)))
    train, r = bytearray(), 0

    def emit(rec):
        nonlocal r
        if rec:
            if r % 10 != 9:
                train.extend(rec + (b"" if rec.endswith(b"\n") else b"\n") + b"%\n")
            r += 1

    for n in names:
        text = open(os.path.join(a.data, n), "rb").read()
        begin = line = 0
        while line < len(text):
            eol = text.find(b"\n", line)
            eol = len(text) if eol < 0 else eol
            if text[line:eol] == b"%":
                emit(text[begin:line])
                begin = eol + 1
            line = eol + 1
        emit(text[begin:])
    T = a.context
    return [list(train[i * T:i * T + T + 1]) for i in range(a.batch * a.steps)]


def torch_steps(precision):
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    C, H, T, L = a.width, a.heads, a.context, a.layers

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
            self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

        def forward(self, x):
            B = x.shape[0]
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (z.view(B, T, H, C // H).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            att = torch.softmax(att.masked_fill(~self.mask, float("-inf")), dim=-1)
            x = x + self.attn_proj((att @ v).transpose(1, 2).reshape(B, T, C))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(256, C), nn.Embedding(T, C)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            for b in self.h:
                x = b(x)
            logits = self.ln_f(x) @ self.wte.weight.T
            return F.cross_entropy(logits.reshape(-1, 256).float(), targets.reshape(-1))

    net = Gpt().to(dev)
    decay = [p for p in net.parameters() if p.dim() >= 2]
    no_decay = [p for p in net.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.99))
    w = torch.tensor(windows(), dtype=torch.long, device=dev)
    best = float("inf")
    for _ in range(a.repeat):
        times = []
        for s in range(a.steps + 2):
            batch = w[(s % a.steps) * a.batch:(s % a.steps + 1) * a.batch]
            sync()
            t0 = time.perf_counter()
            opt.zero_grad()
            if precision == "bf16":
                with torch.autocast(a.device, dtype=torch.bfloat16):
                    loss = net(batch[:, :-1], batch[:, 1:])
            else:
                loss = net(batch[:, :-1], batch[:, 1:])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sync()
            times.append(time.perf_counter() - t0)
        best = min(best, sum(times[2:]) / a.steps)
    return best


params = a.layers * 12 * a.width * a.width + (256 + a.context) * a.width
print(f"bench_gpt: {a.layers} layers, {a.heads} heads, width {a.width}, context {a.context} (~{params / 1e6:.2f} M parameters), "
      f"batch {a.batch} windows, {a.steps} steps, {a.threads} thread(s), {a.device}, best of {a.repeat}")
print(f"{'precision':9s} {'ckpt-train s/step':>18s} {'pytorch s/step':>15s} {'ratio':>7s}  (ratio = ckpt-train / pytorch)")
for prec in (["fp32", "bf16"] if a.precision == "both" else [a.precision]):
    t_ours, t_torch = ours(prec), torch_steps(prec)
    print(f"{prec:9s} {t_ours:18.3f} {t_torch:15.3f} {t_ours / t_torch:7.2f}x", flush=True)
