#!/usr/bin/python3
"""The GPT against PyTorch (float64, an independent formulation) on fixed inputs.

  gpt_torch_oracle.py layers DUMP.h5
      DUMP.h5 from gpt_oracle_dump: LayerNorm, GELU, causal self-attention (outputs and input and
      parameter gradients) and a whole GPT (mean loss and every parameter's gradient).
  gpt_torch_oracle.py train CKPT_TRAIN WORKDIR
      ckpt-train trains a small GPT for 3 steps (AdamW, warmup and cosine decay, clipping by global
      norm) and checkpoints each; PyTorch continues the step-1 checkpoint (weights and AdamW moments)
      through steps 2 and 3 with torch.optim.AdamW and clip_grad_norm_, and must reach the step-3
      checkpoint's weights and moments.

Tolerances: max |resil - torch| over a tensor, divided by max |torch| over it. resil computes in
float32 and torch in float64, so the differences are resil's float32 rounding: measured at most
7e-8 for forward values, 3.4e-7 for gradients and 3.9e-6 after two AdamW steps (which divide the
moments by their square roots and magnify the rounding of small gradients); the tolerances are
about 20 times those: 1e-6, 1e-5 and 1e-4.
"""
import json
import math
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
bad = []


def compare(name, ours, ref, tol):
    ours = np.asarray(ours, dtype=np.float64)
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref, dtype=np.float64)
    assert ours.shape == ref.shape, f"{name}: shape {ours.shape} vs {ref.shape}"
    scale = max(float(np.max(np.abs(ref))), 1e-30)
    err = float(np.max(np.abs(ours - ref))) / scale
    print(f"{name:40s} rel. error {err:.2e} (tolerance {tol:g})")
    if not err <= tol:
        bad.append(name)


def t(a, grad=False):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def attention(qkv, B, T, heads):
    """Causal multi-head self-attention of (B*T, 3C) rows [q | k | v] -> (B*T, C)."""
    C = qkv.shape[1] // 3
    hs = C // heads
    x = qkv.view(B, T, 3 * C)
    q, k, v = x[..., :C], x[..., C:2 * C], x[..., 2 * C:]
    q, k, v = (z.reshape(B, T, heads, hs).transpose(1, 2) for z in (q, k, v))
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    p = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return (p @ v).transpose(1, 2).reshape(B * T, C)


def gpt_loss(P, tokens, layers, heads):
    """Mean next-token cross-entropy of a GPT-2 with parameters P (nanoGPT names) over windows tokens (B, T+1)."""
    inp, tgt = tokens[:, :-1], tokens[:, 1:]
    B, T = inp.shape
    C = P["wte.weight"].shape[1]

    def ln(x, name):
        return F.layer_norm(x, (C,), P[name + ".weight"], P[name + ".bias"], eps=1e-5)

    def linear(x, name):
        return x @ P[name + ".weight"].T + P[name + ".bias"]

    x = (P["wte.weight"][inp] + P["wpe.weight"][:T]).reshape(B * T, C)
    for l in range(layers):
        h = f"h.{l}."
        x = x + linear(attention(linear(ln(x, h + "ln_1"), h + "attn.c_attn"), B, T, heads), h + "attn.c_proj")
        x = x + linear(F.gelu(linear(ln(x, h + "ln_2"), h + "mlp.c_fc"), approximate="tanh"), h + "mlp.c_proj")
    logits = ln(x, "ln_f") @ P["wte.weight"].T
    return F.cross_entropy(logits, tgt.reshape(-1))


def layers(dump):
    with h5py.File(dump, "r") as f:
        D = {k: f["model"][k][()] for k in f["model"]}
    # LayerNorm
    x, w, b = t(D["ln.x"], True), t(D["ln.w"], True), t(D["ln.b"], True)
    y = F.layer_norm(x, (x.shape[1],), w, b, eps=1e-5)
    y.backward(t(D["ln.dy"]))
    compare("layernorm y", D["ln.y"], y, 1e-6)
    compare("layernorm dx", D["ln.dx"], x.grad, 1e-5)
    compare("layernorm dw", D["ln.dw"], w.grad, 1e-5)
    compare("layernorm db", D["ln.db"], b.grad, 1e-5)
    # GELU
    x = t(D["gelu.x"], True)
    y = F.gelu(x, approximate="tanh")
    y.backward(t(D["gelu.dy"]))
    compare("gelu y", D["gelu.y"], y, 1e-6)
    compare("gelu dx", D["gelu.dx"], x.grad, 1e-6)
    # attention
    B, T, heads = (int(v) for v in D["attn.shape"])
    qkv = t(D["attn.qkv"], True)
    out = attention(qkv, B, T, heads)
    out.backward(t(D["attn.dout"]))
    compare("attention out", D["attn.out"], out, 1e-6)
    compare("attention dqkv", D["attn.dqkv"], qkv.grad, 1e-5)
    # the whole model
    vocab, context, nl, nh, width = (int(v) for v in D["gpt.config"])
    P = {k[len("gpt.param."):]: t(v, True) for k, v in D.items() if k.startswith("gpt.param.")}
    loss = gpt_loss(P, torch.tensor(D["gpt.tokens"].astype(np.int64)), nl, nh)
    loss.backward()
    compare("gpt loss", D["gpt.loss"], loss.detach().reshape(1), 1e-6)
    for name, p in sorted(P.items()):
        compare("gpt grad " + name, D["gpt.grad." + name], p.grad, 1e-5)


# ---------------------------------------------------------------- end to end: AdamW, schedule, clipping
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A bit flip in a checkpoint is a soft error.",
    "Training resumes from the last complete checkpoint.",
    "Every sum runs in a fixed order.",
    "Attention looks only at the past.",
]
ARGS = dict(layers=2, heads=2, width=16, context=8, batch=4, limit=4, lr=0.01, warmup=2, decay_steps=2, min_lr_ratio=0.2, clip=0.05,
            weight_decay=0.1, beta2=0.99)


def corpus_streams(records):
    """The training and validation streams of resil::data::load_text (every 10th record validates)."""
    train, valid = b"", b""
    for i, r in enumerate(records):
        if i % 10 == 9:
            valid += r + b"%\n"
        else:
            train += r + b"%\n"
    return train, valid


def schedule(step):
    a = ARGS
    if step <= a["warmup"]:
        return step / a["warmup"]
    progress = min(1.0, (step - a["warmup"]) / a["decay_steps"])
    return a["min_lr_ratio"] + 0.5 * (1 + math.cos(math.pi * progress)) * (1 - a["min_lr_ratio"])


def read_ckpt(path):
    with h5py.File(path, "r") as f:
        model = {k: f["model"][k][()] for k in f["model"]}
        opt = {k: {s: f["optimizer"][k][s][()] for s in f["optimizer"][k]} for k in f["optimizer"]}
    return model, opt


def train(ckpt_train, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    records = [(SENTENCES[i % len(SENTENCES)] + f" ({i})\n").encode() for i in range(30)]
    with open(os.path.join(work, "corpus.txt"), "wb") as f:
        f.write(b"%\n".join(records) + b"%\n")
    a = ARGS
    cmd = [ckpt_train, "train", "--model", "gpt", "--data", os.path.join(work, "corpus.txt"), "--epochs", "3", "--ckpt-every", "1",
           "--seed", "3", "--ckpt-dir", os.path.join(work, "run"), "--test-limit", "4"]
    for k, v in a.items():
        cmd += ["--" + k.replace("_", "-"), str(v)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    m1, o1 = read_ckpt(os.path.join(work, "run", "ckpt-step00000001.h5"))
    m3, o3 = read_ckpt(os.path.join(work, "run", "ckpt-step00000003.h5"))
    train_stream, _ = corpus_streams(records)
    T = a["context"]
    windows = np.array([list(train_stream[i * T:i * T + T + 1]) for i in range(a["limit"])], dtype=np.int64)
    P = {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in m1.items()}
    names = sorted(P)
    decay = [P[n] for n in names if P[n].dim() >= 2]
    no_decay = [P[n] for n in names if P[n].dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a["lr"], betas=(0.9, a["beta2"]), eps=1e-8)
    for n in names:
        opt.state[P[n]] = {"step": torch.tensor(1.0), "exp_avg": torch.tensor(o1[n]["exp_avg"].astype(np.float64)),
                           "exp_avg_sq": torch.tensor(o1[n]["exp_avg_sq"].astype(np.float64))}
    clipped = 0
    for step in (2, 3):
        for g in opt.param_groups:
            g["lr"] = a["lr"] * schedule(step)
        opt.zero_grad()
        loss = gpt_loss(P, torch.tensor(windows), a["layers"], a["heads"])
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_([P[n] for n in names], a["clip"]))
        clipped += norm > a["clip"]
        print(f"step {step}: loss {float(loss):.6f}, gradient norm {norm:.4f}, lr {a['lr'] * schedule(step):.6f}")
        opt.step()
    if clipped != 2:
        bad.append("the gradients were not clipped at both steps (choose a smaller clip)")
    for n in names:
        compare("step 3 " + n, m3[n], P[n], 1e-4)
        compare("step 3 " + n + " exp_avg", o3[n]["exp_avg"], opt.state[P[n]]["exp_avg"], 1e-4)
        compare("step 3 " + n + " exp_avg_sq", o3[n]["exp_avg_sq"], opt.state[P[n]]["exp_avg_sq"], 1e-4)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "layers":
        layers(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "train":
        train(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
    if bad:
        print("FAIL:", ", ".join(bad))
        sys.exit(1)
    print("OK")
