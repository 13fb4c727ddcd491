#!/usr/bin/python3
"""CPU vs GPU loss curves over 320 steps (CTest label gpu; exit 77 = skipped without a GPU).

  loss_curve.py CKPT_TRAIN DIR

mlp and cnn, seed 7, 1024 Fashion-MNIST samples, batch 64 (16 steps per epoch), 20 epochs = 320
steps, Adam with the model's default rate and --lr-decay 0.9, once with --device cpu and once
with --device cuda. The kernels are the same math in fp32 but cuBLAS sums GEMMs in another order
than OpenBLAS, so the runs drift apart by rounding, not by a different model. Tolerances:
  - every epoch's mean training loss: |gpu - cpu| <= 0.03 * cpu + 0.003  (3 % relative);
  - final test accuracy (500 test samples): within 0.02 (10 samples);
  - the curve is real: epoch 20's loss is below 0.6 x epoch 1's on both devices.
"""
import json, os, shutil, subprocess, sys

ct, d = sys.argv[1], sys.argv[2]
shutil.rmtree(d, ignore_errors=True)
os.makedirs(d)

def train(model, device):
    out = os.path.join(d, f"{model}_{device}")
    args = [ct, "train", "--model", model, "--seed", "7", "--limit", "1024", "--test-limit", "500", "--batch", "64",
            "--epochs", "20", "--lr-decay", "0.9", "--device", device, "--ckpt-every", "20",
            "--ckpt-dir", out, "--metrics", out + ".jsonl", "--summary", out + ".json"]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout + p.stderr, file=sys.stderr)
        sys.exit(f"FAIL: {model} on {device} exited {p.returncode}")
    curve = [json.loads(l) for l in open(out + ".jsonl") if l.strip()]
    return [r["loss"] for r in curve], json.load(open(out + ".json"))

probe = subprocess.run([ct, "train", "--model", "mlp", "--seed", "7", "--limit", "64", "--test-limit", "10", "--epochs", "1",
                        "--device", "auto", "--ckpt-dir", os.path.join(d, "probe"), "--summary", os.path.join(d, "probe.json")],
                       capture_output=True, text=True)
dev = json.load(open(os.path.join(d, "probe.json"))).get("device", "") if probe.returncode == 0 else ""
if not dev.startswith("cuda"):
    print(f"no CUDA device (auto chose {dev!r}): skipped")
    sys.exit(77)
print("device:", dev)
bad = 0
for model in ("mlp", "cnn"):
    lc, sc = train(model, "cpu")
    lg, sg = train(model, "cuda")
    if len(lc) != 20 or len(lg) != 20:
        sys.exit(f"FAIL: {model}: expected 20 epochs of metrics, got {len(lc)} (cpu) and {len(lg)} (cuda)")
    worst = max(abs(g - c) / (0.03 * c + 0.003) for c, g in zip(lc, lg))
    print(f"{model}: epoch loss cpu {lc[0]:.4f} -> {lc[-1]:.4f}, cuda {lg[0]:.4f} -> {lg[-1]:.4f}; "
          f"worst epoch gap {worst:.2f} of the tolerance; test acc cpu {sc['test_accuracy']:.4f} cuda {sg['test_accuracy']:.4f}")
    for e, (c, g) in enumerate(zip(lc, lg), 1):
        if abs(g - c) > 0.03 * c + 0.003:
            print(f"FAIL: {model} epoch {e}: loss cpu {c:.5f} vs cuda {g:.5f}", file=sys.stderr)
            bad += 1
    if abs(sc["test_accuracy"] - sg["test_accuracy"]) > 0.02:
        print(f"FAIL: {model}: test accuracy cpu {sc['test_accuracy']} vs cuda {sg['test_accuracy']}", file=sys.stderr)
        bad += 1
    for name, l in (("cpu", lc), ("cuda", lg)):
        if not l[-1] < 0.6 * l[0]:
            print(f"FAIL: {model} on {name} did not learn: {l[0]:.4f} -> {l[-1]:.4f}", file=sys.stderr)
            bad += 1
print("loss_curve:", "OK" if bad == 0 else f"{bad} failures")
sys.exit(1 if bad else 0)
