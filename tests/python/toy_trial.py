#!/usr/bin/python3
"""A resil.trial module whose outcome is chosen by the trial id (mod 9), so that every class a
trial can end in comes out of real processes, in command mode and in a worker alike. The
checkpoint is a .npy array; the metrics are its mean ("accuracy") and its absolute sum ("loss")."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import numpy  # noqa: E402

import resil.trial  # noqa: E402

MARKER = os.environ.get("TOY_MARKER", "toy-straggler")


def setup():
    return {"setup_pid": os.getpid()}


def evaluate(ckpt, trial):
    w = numpy.load(ckpt)
    case = int(trial.index) % 9 if trial.index not in (None, "golden") else -1
    if case == 0:
        time.sleep(600)  # a hang: the campaign's timeout kills the trial's process group
    if case == 1:
        os.kill(os.getpid(), signal.SIGSEGV)  # crash, signal 11
    if case == 2:
        raise resil.trial.LoadFailure("the checkpoint cannot be read")  # exit 4: load_failure
    if case == 3:
        return {"accuracy": float(w.mean()), "loss": float("nan")}  # a non-finite metric: nan_later
    if case == 4:
        return {"loss": 1.0}  # no "accuracy": unreadable_summary
    if case == 5:
        raise resil.trial.NonFinite("the loss diverged")  # exit 6: nan_later
    if case == 6:
        raise ZeroDivisionError("a bug in the trial")  # exit 1: crash
    if case == 7:
        # A straggler in the trial's process group: killed with the group when the trial ends.
        subprocess.Popen(["/bin/sh", "-c", f"sleep 300; : {MARKER}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {"accuracy": float(w.mean()), "loss": float(numpy.abs(w).sum())}


if __name__ == "__main__":
    resil.trial.main(evaluate=evaluate, setup=setup)
