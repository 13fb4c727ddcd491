#!/usr/bin/python3
"""A resil.trial module whose setup() runs parallel torch operations on two threads (torch's
OpenMP pool is live when the worker forks its trials) and whose function runs parallel regions
again: in a worker, the trial's first parallel region must not wait for the pool's threads,
which a fork does not copy. The function also checks that it runs with the thread count setup()
chose and that its parallel region did use a second thread, so a worker that "fixed" the hang by
running trials on one thread (other numbers than command mode) fails as well."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import numpy  # noqa: E402
import torch  # noqa: E402

import resil.trial  # noqa: E402


def setup():
    torch.set_num_threads(2)
    torch.manual_seed(0)
    a = torch.randn(256, 256, dtype=torch.float64)
    for _ in range(3):
        a = torch.tanh(a @ a)  # parallel regions: libgomp's pool (one thread besides this one) stays
    return a


def evaluate(ckpt, trial):
    if torch.get_num_threads() != 2:
        raise resil.trial.Mismatch(f"the trial runs on {torch.get_num_threads()} threads, setup() chose 2")
    w = torch.from_numpy(numpy.load(ckpt)).to(torch.float64)
    b = trial.state
    for _ in range(3):
        b = torch.tanh(b @ b)  # parallel regions in the trial (a forked child in a worker)
    if len(os.listdir("/proc/self/task")) < 2:
        raise resil.trial.Mismatch("the trial's parallel regions ran on one thread")
    x = torch.tanh(b[:64, :64] * w[:64].reshape(1, 64)).sum()
    return {"accuracy": float(w.mean()), "loss": float(x), "state_sum": float(b.sum())}


if __name__ == "__main__":
    resil.trial.main(evaluate=evaluate, setup=setup)
