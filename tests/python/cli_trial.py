#!/usr/bin/python3
"""A resil.trial module for the command-line checks of trial_cli.sh: the function's behaviour is
chosen by --arg mode=..., setup()'s by the environment (CLI_SETUP=fail|crash|exit256|sleep;
CLI_SETUP_MARK=FILE is created when setup() runs). The checkpoint is a .npy array."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import numpy  # noqa: E402

import resil.trial  # noqa: E402


def setup():
    if os.environ.get("CLI_SETUP_MARK"):
        open(os.environ["CLI_SETUP_MARK"], "w").close()
    how = os.environ.get("CLI_SETUP", "")
    if how == "fail":
        raise resil.trial.LoadFailure("the test data is missing")
    if how == "crash":
        raise KeyError("no-such-key")
    if how == "exit256":
        sys.exit(256)
    if how == "sleep":
        time.sleep(60)
    return {"pid": os.getpid()}


def evaluate(ckpt, trial):
    assert trial.index is None or isinstance(trial.index, str), trial.index  # the docstring: a string
    w = numpy.load(ckpt)
    mode = trial.args.get("mode", "")
    if mode == "exit256":
        sys.exit(256)
    if mode == "exit-1":
        sys.exit(-1)
    if mode == "exit3":
        sys.exit(3)
    if mode == "fail0":
        raise resil.trial.Failure(0, "not really ok")
    if mode == "fail300":
        raise resil.trial.Failure(300, "beyond a status")
    if mode == "kbint":
        raise KeyboardInterrupt
    if mode == "sleep":
        time.sleep(60)
    out = {"accuracy": float(w.mean()), "loss": float(numpy.abs(w).sum()), "seed": trial.seed}
    if mode == "path":
        out["evaluated"] = ckpt  # a str, with surrogate escapes where the path is not UTF-8
    if mode == "badkey":
        out["evaluated"], out["evaluated_escaped"] = ckpt, "mine"
    return out


if __name__ == "__main__":
    resil.trial.main(evaluate=evaluate, setup=setup)
