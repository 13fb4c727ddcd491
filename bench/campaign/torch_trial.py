"""One trial the way the seed study ran it (baseline (d) of bench_campaign.py): a fresh Python
process copies the golden checkpoint, flips one bit element-wise with h5py, loads the weights into
the same PyTorch MLP and evaluates it on the first 2,000 test samples, or resumes one epoch on the
first 12,000 training samples (Adam, batch 64), and writes the summary it measured itself."""
import json
import os
import shutil
import sys
import time

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
from fmnist_idx import find, idx  # noqa: E402
from reference_nets import mlp  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def main():
    mode, golden, seed, work, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
    torch.set_num_threads(1)  # one core per trial, as each ckpt-train trial (threads = 1)
    ckpt = os.path.join(work, "trial.h5")
    shutil.copy(golden, ckpt)
    rng = np.random.default_rng(seed)
    with h5py.File(ckpt, "r+") as f:  # element-wise flip: read the element, xor the bit, write it back
        names = sorted(f["model"].keys())
        d = f["model"][names[rng.integers(len(names))]]
        i = np.unravel_index(int(rng.integers(d.size)), d.shape)
        v = np.array(d[i], dtype=np.float32).view(np.uint32) ^ np.uint32(1 << int(rng.integers(32)))
        d[i] = v.view(np.float32)
        state = {k: torch.from_numpy(np.asarray(f["model"][k])) for k in names}
    t0 = time.perf_counter()
    net = mlp()
    net.load_state_dict({f"{2 * (int(k[2]) - 1)}.{k.split('.')[1]}": v for k, v in state.items()})
    if mode == "resume":
        x = torch.from_numpy(idx(find(DATA, "train-images-idx3-ubyte", "torch_trial"))[:12000].reshape(-1, 784).astype(np.float32) / 255.0)
        y = torch.from_numpy(idx(find(DATA, "train-labels-idx1-ubyte", "torch_trial"))[:12000].astype(np.int64))
        opt = torch.optim.Adam(net.parameters(), lr=1e-3 * 0.75)
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
        for s in range(0, len(x) - 63, 64):
            b = order[s:s + 64]
            opt.zero_grad()
            nn_loss = torch.nn.functional.cross_entropy(net(x[b]), y[b])
            nn_loss.backward()
            opt.step()
    tx = torch.from_numpy(idx(find(DATA, "t10k-images-idx3-ubyte", "torch_trial"))[:2000].reshape(-1, 784).astype(np.float32) / 255.0)
    ty = torch.from_numpy(idx(find(DATA, "t10k-labels-idx1-ubyte", "torch_trial"))[:2000].astype(np.int64))
    with torch.no_grad():
        acc = float((net(tx).argmax(1) == ty).float().mean())
    json.dump({"test_accuracy": acc, "wall_seconds": time.perf_counter() - t0}, open(out, "w"))


if __name__ == "__main__":
    main()
