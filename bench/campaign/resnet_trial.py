#!/usr/bin/python3
"""The trial of bench_pytorch_worker.py: a ResNet-18-shaped network (torchvision's resnet18 layout:
7x7/2 stem, max-pool, four stages of two basic blocks, 64-128-256-512 channels, BatchNorm; one
input channel, 10 classes; torchvision itself is not needed) evaluated on the first
RESIL_BENCH_TEST_IMAGES (default 1000) Fashion-MNIST test images, as a resil.trial function.

    resnet_trial.py train --out golden.pt [--steps 40]  # the golden checkpoint (a short training)
    resnet_trial.py eval --from CKPT --out SUMMARY      # one trial (resil.trial), or "serve" for a worker
    resnet_trial.py loop --from CKPT --n N              # evaluate() N times in one warm process and N times in a forked child

Each call of evaluate() appends its own wall and CPU seconds (checkpoint load, model build, forward
passes) to $RESIL_BENCH_TIMES when set: the function's own time the benchmark compares per-trial
costs with. With RESIL_BENCH_EMPTY=GOLDEN-SUMMARY it returns that summary's metrics and does nothing
else: a trial then costs what resil adds (flip, revert, hash, record, fork and exit of the worker's child)."""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "train"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import resil.trial  # noqa: E402
from fmnist_idx import find, idx  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
torch.set_num_threads(1)
torch.set_num_interop_threads(1)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (self.down(x) if self.down is not None else x))


class ResNet18(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64)
        self.pool = nn.MaxPool2d(3, 2, 1)
        chans, layers, cin = (64, 128, 256, 512), [], 64
        for i, c in enumerate(chans):
            layers.append(nn.Sequential(Block(cin, c, 1 if i == 0 else 2), Block(c, c, 1)))
            cin = c
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def images(split, n):
    prefix = "train" if split == "train" else "t10k"
    x = idx(find(DATA, f"{prefix}-images-idx3-ubyte", "resnet_trial"))[:n].astype(np.float32) / 255.0
    y = idx(find(DATA, f"{prefix}-labels-idx1-ubyte", "resnet_trial"))[:n].astype(np.int64)
    return torch.from_numpy((x - 0.2860) / 0.3530).reshape(-1, 1, 28, 28), torch.from_numpy(y)


def setup():
    return images("test", int(os.environ.get("RESIL_BENCH_TEST_IMAGES", "1000")))


def evaluate(ckpt, trial):
    t0, c0 = time.perf_counter(), time.process_time()
    if os.environ.get("RESIL_BENCH_EMPTY"):  # the golden summary's metrics, nothing computed: resil's own cost per trial
        g = json.load(open(os.environ["RESIL_BENCH_EMPTY"]))
        result = {"test_accuracy": g["test_accuracy"], "test_loss": g["test_loss"]}
    else:
        state = torch.load(ckpt, map_location="cpu")
        model = ResNet18()
        model.load_state_dict(state["model"])
        model.eval()
        x, y = trial.state
        loss, correct = 0.0, 0
        with torch.no_grad():
            for i in range(0, len(x), 250):
                out = model(x[i:i + 250])
                loss += float(nn.functional.cross_entropy(out, y[i:i + 250], reduction="sum"))
                correct += int((out.argmax(1) == y[i:i + 250]).sum())
        result = {"test_accuracy": correct / len(x), "test_loss": loss / len(x)}
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    if os.environ.get("RESIL_BENCH_TIMES"):
        with open(os.environ["RESIL_BENCH_TIMES"], "a") as f:
            f.write(f"{took} {cpu}\n")
    return result


def train(out, steps, batch=64):
    """A short Adam training from seed 7 (40 steps of 64 images: about 79 % on the first 300 test
    images), so that flips meet a network that classifies."""
    torch.manual_seed(7)
    model = ResNet18()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = images("train", steps * batch)
    model.train()
    for s in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[s * batch:(s + 1) * batch]), y[s * batch:(s + 1) * batch]).backward()
        opt.step()
    with open(out, "wb") as f:
        torch.save({"model": model.state_dict()}, f)


def loop(ckpt, n):
    """evaluate() in this one process (torch imported, data loaded, a first call as warm-up), then n
    rounds of a call here and a call in a forked child (what a worker's trial is, without resil):
    the mean wall and CPU seconds of each, as JSON on stdout. The rounds alternate, so the two means
    see the same machine load."""
    class T:
        state = setup()
    evaluate(ckpt, T)
    here, forked = [], []
    for _ in range(n):
        t0, c0 = time.perf_counter(), time.process_time()
        evaluate(ckpt, T)
        here.append((time.perf_counter() - t0, time.process_time() - c0))
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            t0, c0 = time.perf_counter(), time.process_time()
            evaluate(ckpt, T)
            os.write(w, f"{time.perf_counter() - t0} {time.process_time() - c0}".encode())
            os._exit(0)
        os.close(w)
        got = os.read(r, 100)
        os.close(r)
        os.waitpid(pid, 0)
        forked.append(tuple(map(float, got.split())))
    print(json.dumps({"wall": sum(x[0] for x in here) / n, "cpu": sum(x[1] for x in here) / n,
                      "forked_wall": sum(x[0] for x in forked) / n, "forked_cpu": sum(x[1] for x in forked) / n}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["train"]:
        train(sys.argv[sys.argv.index("--out") + 1], int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 40)
    elif sys.argv[1:2] == ["loop"]:
        loop(sys.argv[sys.argv.index("--from") + 1], int(sys.argv[sys.argv.index("--n") + 1]))
    else:
        resil.trial.main(evaluate=evaluate, setup=setup)
