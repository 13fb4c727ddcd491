#!/usr/bin/python3
"""ckpt-train's results pinned bit for bit: MLP, CNN and DLRM under --parallel none, dp and mp, the
GPT in fp32 and bf16 under none, dp, tp and pp, a resume and an eval must give exactly these checkpoint digests and losses, in every environment of
tests/support/numeric_variants.py (OPENBLAS_CORETYPE set to each kernel the CPU runs, resil's
portable GEMM path, more threads). The values belong to numeric configuration cpu-fma-seqk-1
(docs/design/determinism.md): a change of them is a change of every result users have.

usage: ckpt_train_pinned.py CKPT_TRAIN MPIEXEC WORKDIR [--variant NAME] [--record] [--only CASE]
  --record   print this binary's values as a PINNED table instead of checking
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from numeric_variants import compare, variant  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
COMMON = ["--seed", "7", "--limit", "1024", "--test-limit", "300", "--batch", "64", "--epochs", "1"]
DLRM = ["--optimizer", "adagrad", "--lr", "0.05", "--synthetic-samples", "1024"]
GPT = ["--model", "gpt", "--context", "32", "--layers", "2", "--heads", "2", "--width", "32", "--lr", "1e-2"]

# name: (ranks, arguments after `train`)
CASES = {
    "mlp_none": (1, ["--model", "mlp", "--parallel", "none"]),
    "mlp_dp2": (2, ["--model", "mlp", "--parallel", "dp"]),
    "mlp_mp2": (2, ["--model", "mlp", "--parallel", "mp"]),
    "cnn_none": (1, ["--model", "cnn", "--parallel", "none", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]),
    "cnn_dp2": (2, ["--model", "cnn", "--parallel", "dp"]),
    "cnn_mp2": (2, ["--model", "cnn", "--parallel", "mp", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]),
    "dlrm_none": (1, ["--model", "dlrm", "--parallel", "none", *DLRM]),
    "dlrm_dp2": (2, ["--model", "dlrm", "--parallel", "dp", *DLRM]),
    "gpt_none": (1, [*GPT, "--parallel", "none"]),
    "gpt_bf16_dp2": (2, [*GPT, "--parallel", "dp", "--precision", "bf16"]),
    "gpt_tp2": (2, [*GPT, "--parallel", "tp"]),
    "gpt_bf16_pp2": (2, [*GPT, "--parallel", "pp", "--precision", "bf16"]),
}
# Derived cases: mlp_none's checkpoint resumed to a second epoch, and evaluated.
DERIVED = ["mlp_none_resume", "mlp_none_eval"]

PINNED = {
    "mlp_none": ("ed832b6501a416ce", "1.8741945048095658"),
    "mlp_none_resume": ("66c54121e764b7f6", "1.0991627483454067"),
    "mlp_none_eval": ("0.5666666666666667", "1.3118156472345193"),
    "mlp_dp2": ("861d395863dd2b7f", "1.874194499454461"),
    "mlp_mp2": ("5de2e863d4875df1", "1.8741945033252705"),
    "cnn_none": ("59f00e7e2d7837f7", "2.303125604055822"),
    "cnn_dp2": ("3f2d58ceb21da74d", "2.0501343069481663"),
    "cnn_mp2": ("1232b0fb458d4f95", "2.3031256042886525"),
    "dlrm_none": ("23f75742d6559661", "0.6872922154434491"),
    "dlrm_dp2": ("d93884898f5cac88", "0.6872922162219766"),
    "gpt_none": ("e55babddf3ccbf06", "3.8481536107647116"),
    "gpt_bf16_dp2": ("b1d8542c1ee04414", "3.8491057418941637"),
    "gpt_tp2": ("e7e173be552729d2", "3.8481521329558745"),
    "gpt_bf16_pp2": ("f6e28b20b56e94cc", "3.8544964541579247"),
}


def digest(path):
    """SHA-256 over every /model and /optimizer dataset (name, dtype, shape, bytes) of a checkpoint
    file or mp manifest, in name order: what a run computed, nothing about when or where."""
    files = [path]
    if path.endswith(".manifest.json"):
        with open(path) as f:
            files = [os.path.join(os.path.dirname(path), s) for s in json.load(f)["shards"]]
    items = {}
    for fn in files:
        with h5py.File(fn, "r") as h:
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset) and name.split("/")[0] in ("model", "optimizer"):
                    a = obj[()]
                    items[name] = f"{name}|{a.dtype.str}|{a.shape}|".encode() + a.tobytes()
            h.visititems(visit)
    h = hashlib.sha256()
    for k in sorted(items):
        h.update(items[k])
    return h.hexdigest()[:16]


def run(cmd, env, what):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.stdout.write(p.stdout + p.stderr)
        raise SystemExit(f"FAIL: {what}: exit {p.returncode}: {' '.join(cmd)}")
    return p


def summary(path):
    with open(path) as f:
        return json.load(f)


def main():
    exe, mpiexec, work = sys.argv[1:4]
    record = "--record" in sys.argv
    vname = sys.argv[sys.argv.index("--variant") + 1] if "--variant" in sys.argv else "default"
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    v = variant(vname)
    if isinstance(v, str):
        print(f"skipped: variant {vname}: {v}")
        return
    env, extra = v
    work = os.path.join(work, vname)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    got = {}
    for name, (ranks, args) in CASES.items():
        if only and name != only and not (only in DERIVED and name == "mlp_none"):
            continue
        d = os.path.join(work, name)
        launch = [exe] if ranks == 1 else [mpiexec, "-n", str(ranks), exe]
        data = ["--data", DATA] if args[1] in ("mlp", "cnn") else []  # dlrm: synthetic clicks; gpt: the embedded text
        run([*launch, "train", *args, *COMMON, *extra, *data, "--ckpt-dir", d, "--summary", d + ".json"], env, name)
        s = summary(d + ".json")
        got[name] = (digest(s["last_checkpoint"]), repr(s["final_loss"]))
        if s.get("numeric", {}).get("id") != "cpu-fma-seqk-1":
            raise SystemExit(f"FAIL: {name}: the summary names numeric configuration {s.get('numeric')}, not cpu-fma-seqk-1")
        if name == "mlp_none":
            first = s["last_checkpoint"]
            r = os.path.join(work, "mlp_none_resume")
            run([exe, "resume", "--from", first, "--epochs", "2", *extra, "--ckpt-dir", r, "--summary", r + ".json"], env, "resume")
            rs = summary(r + ".json")
            got["mlp_none_resume"] = (digest(rs["last_checkpoint"]), repr(rs["final_loss"]))
            e = os.path.join(work, "mlp_none_eval.json")
            run([exe, "eval", "--from", first, "--data", DATA, "--test-limit", "300", "--summary", e], env, "eval")
            es = summary(e)
            got["mlp_none_eval"] = (repr(es["test_accuracy"]), repr(es["test_loss"]))
    compare({k: v for k, v in got.items() if not only or k == only}, PINNED, vname, record)

if __name__ == "__main__":
    main()
