"""The PyTorch reference networks the training benchmarks compare ckpt-train against, defined once:
the same layers as ckpt-train's models (docs/guide/ckpt-train.md). Imports torch, so import this module only
after checking that torch is there."""
import numpy as np
import torch
from torch import nn

from fmnist_idx import find, idx


def mlp():
    """784-256-128-10 with ReLU (ckpt-train --model mlp); takes (N, 784)."""
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def cnn():
    """LeNet-5 style (ckpt-train --model cnn): conv5x5 1->6 pad 2, pool, conv5x5 6->16, pool,
    400-120-84-10; takes (N, 1, 28, 28)."""
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def fashion_mnist(data, model, n, who):
    """The first n training samples as (x, y) tensors shaped for `model` (mlp or cnn), pixels / 255."""
    x = torch.from_numpy(idx(find(data, "train-images-idx3-ubyte", who))[:n].astype(np.float32) / 255.0)
    y = torch.from_numpy(idx(find(data, "train-labels-idx1-ubyte", who))[:n].astype(np.int64))
    return (x.reshape(-1, 784) if model == "mlp" else x.reshape(-1, 1, 28, 28)), y


class Dlrm(nn.Module):
    """ckpt-train --model dlrm: 13 dense features -> 64 -> 16, 26 EmbeddingBag(1000, 16, sum) with one
    index per table, pairwise dot interaction (27 vectors: 16 + 351 features), 367 -> 64 -> 1."""

    def __init__(self):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(13, 64), nn.ReLU(), nn.Linear(64, 16), nn.ReLU())
        self.emb = nn.ModuleList(nn.EmbeddingBag(1000, 16, mode="sum") for _ in range(26))
        self.top = nn.Sequential(nn.Linear(16 + 27 * 26 // 2, 64), nn.ReLU(), nn.Linear(64, 1))
        self.li, self.lj = torch.tril_indices(27, 27, offset=-1)  # pairs (i, j), i > j, row-major

    def forward(self, dense, sparse):
        z = self.bottom(dense)
        offsets = torch.arange(sparse.shape[0], device=sparse.device)
        v = torch.stack([z] + [e(sparse[:, t].contiguous(), offsets) for t, e in enumerate(self.emb)], dim=1)
        dots = torch.bmm(v, v.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([z, dots], dim=1)).squeeze(1)
