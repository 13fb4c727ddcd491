#!/usr/bin/python3
"""Run-to-run identity on the GPU (CTest label gpu; exit 77 = skipped without a GPU).

  same_seed_twice.py CKPT_TRAIN DIR COMPARE_CKPT

mlp, cnn, dlrm and the gpt in fp32 and bf16, each trained twice on --device cuda with seed 7 for 2
epochs (mlp and cnn: 1024 Fashion-MNIST samples, batch 64; dlrm: 4096 synthetic clicks, Adagrad;
gpt: 2 layers, width 128, 256 windows of 64 bytes of Debian's fortunes, batch 16): the two runs' last
checkpoints must hold bitwise equal /model and /optimizer datasets (COMPARE_CKPT, i.e.
tests/train/compare_ckpt.py) and report the same per-epoch losses. The CUDA backend has no atomics
in its reductions and cuBLAS runs in pedantic FP32, so nothing but the seed decides the bits.
"""
import glob, json, os, shutil, subprocess, sys

ct, d, compare = sys.argv[1:4]
shutil.rmtree(d, ignore_errors=True)
os.makedirs(d)
GPT = ["--model", "gpt", "--layers", "2", "--heads", "4", "--width", "128", "--context", "64", "--limit", "256",
       "--test-limit", "32", "--batch", "16"]
MODELS = {
    "mlp": ["--model", "mlp", "--limit", "1024", "--test-limit", "500", "--batch", "64"],
    "cnn": ["--model", "cnn", "--limit", "1024", "--test-limit", "500", "--batch", "64"],
    "dlrm": ["--model", "dlrm", "--optimizer", "adagrad", "--lr", "0.05", "--synthetic-samples", "4096", "--test-limit", "500",
             "--batch", "64"],
    "gpt": GPT,
    "gpt_bf16": GPT + ["--precision", "bf16"],
}

def train(model, tag, device="cuda", epochs="2"):
    out = os.path.join(d, f"{model}_{tag}")
    args = [ct, "train", "--seed", "7", "--epochs", epochs, "--device", device, "--ckpt-dir", out,
            "--metrics", out + ".jsonl", "--summary", out + ".json"] + MODELS[model]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout + p.stderr, file=sys.stderr)
        sys.exit(f"FAIL: {model} ({tag}) exited {p.returncode}")
    return out

probe = train("mlp", "probe", device="auto", epochs="1")
dev = json.load(open(probe + ".json")).get("device", "")
if not dev.startswith("cuda"):
    print(f"no CUDA device (auto chose {dev!r}): skipped")
    sys.exit(77)
print("device:", dev)
bad = 0
for model in MODELS:
    a, b = train(model, "a"), train(model, "b")
    ckpts = sorted(os.path.basename(p) for p in glob.glob(os.path.join(a, "ckpt-step*.h5")))
    if not ckpts:
        sys.exit(f"FAIL: {model}: no checkpoint in {a}")
    last = ckpts[-1]
    losses = [[json.loads(l)["loss"] for l in open(x + ".jsonl") if l.strip()] for x in (a, b)]
    same_ckpt = subprocess.run([sys.executable, compare, os.path.join(a, last), os.path.join(b, last)]).returncode == 0
    same_loss = losses[0] == losses[1]
    print(f"{model}: {last} {'bitwise equal' if same_ckpt else 'DIFFERS'}; epoch losses {losses[0]} "
          f"{'equal' if same_loss else 'differ: ' + str(losses[1])}")
    bad += (not same_ckpt) + (not same_loss)
if bad:
    sys.exit(f"FAIL: {bad} difference(s) between two runs with one seed")
print("same_seed_twice: OK")
