#!/usr/bin/python3
"""The trials of examples/pytorch/train.py as Python functions, for resil.trial: a campaign runs
them as a command (`python3 trial.py eval --from CKPT --out SUMMARY`) or, with "mode": "worker", in
a resident worker that imports torch, this module and the test images once and forks each trial.

  evaluate(ckpt): the test accuracy and loss of a checkpoint on the first 1000 test images; a
                  non-finite loss is returned as it is (the campaign classifies it nan_*).
  resume(ckpt):   train.py's resume: to the end of a 2-epoch schedule (--arg epochs=N), then
                  evaluate; saves {dir}/final.pt and names it last_checkpoint (bit_masked).

Exit codes are train.py's (resil's): 4 torch.load cannot read the file, 6 NaN/Inf during training,
7 not this script's checkpoint. docs/guide/pytorch.md walks through it.
"""
import os
import sys

try:
    import resil.trial
except ImportError:  # run from a checkout without PYTHONPATH=python: the package next to this example
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import resil.trial

import torch

import train  # the example's model, data and checkpoint code (this file's directory)

TEST_IMAGES = 1000
DATA = os.environ.get("RESIL_EXAMPLE_DATA", train.DEFAULT_DATA)

# As train.py: one thread, deterministic kernels; the same checkpoint gives the same bits.
torch.set_num_threads(1)
torch.set_num_interop_threads(1)
torch.use_deterministic_algorithms(True)


def setup():
    """Once per process (per worker): the test images every trial evaluates on."""
    return train.load_split(torch, DATA, "test", TEST_IMAGES)


def _load(ckpt):
    """The checkpoint's model and optimizer, train.py's failures as resil's (same exit codes)."""
    try:
        ck = train.load_checkpoint(torch, ckpt)
        model, opt = train.build(torch, ck["seed"], 1e-3)
        train.restore(torch, ckpt, ck, model, opt)
    except train.Failure as f:
        raise resil.trial.Failure(f.code, str(f)) from None
    return ck, model, opt


def _metrics(model, test):
    loss, acc = train.evaluate(torch, model, *test)
    return {"test_accuracy": acc, "test_loss": loss}


def evaluate(ckpt, trial):
    _, model, _ = _load(ckpt)
    return _metrics(model, trial.state)


def resume(ckpt, trial):
    ck, model, opt = _load(ckpt)
    epochs = int(trial.args.get("epochs", "2"))
    limit, batch = ck["args"]["limit"], ck["args"]["batch_size"]
    summary = {"epochs_trained": 0}
    try:
        x, y = train.load_split(torch, DATA, "train", limit)
        train.train_epochs(torch, model, opt, x, y, ck["seed"], ck["epoch"], epochs, batch, summary)
    except train.NonFinite as f:
        raise resil.trial.NonFinite(str(f)) from None
    except train.Failure as f:
        raise resil.trial.Failure(f.code, str(f)) from None
    bad = train.first_nonfinite(torch, model)
    if bad:
        raise resil.trial.NonFinite(f"{bad} holds NaN/Inf at the end of training")
    out = _metrics(model, trial.state)
    if trial.dir:
        final = os.path.join(trial.dir, "final.pt")
        train.save_checkpoint(torch, final, model, opt, epochs, ck["seed"], ck["args"])
        out["last_checkpoint"] = final
    out["final_loss"] = summary.get("final_loss")
    return out


if __name__ == "__main__":
    resil.trial.main(evaluate=evaluate, resume=resume, setup=setup)
