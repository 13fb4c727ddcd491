#!/usr/bin/python3
"""ckpt-train --reduce nccl end to end under mpiexec with 2 ranks (CTest label gpu; 77 = skipped).

  nccl_train.py CKPT_TRAIN DIR MPIEXEC COMPARE_CKPT

NCCL (>= 2.5) refuses two ranks of one communicator on the same GPU, so:
- ranks sharing one GPU: `--reduce nccl` must fail with exit 2 and a line naming the cause, and
  `--reduce auto` must fall back to the host path (recorded "host", bitwise equal to a
  `--reduce host` run); then the NCCL runs are skipped (exit 77);
- one GPU per rank (2 or more GPUs): dp and mp with NCCL, each run twice, bitwise equal (run-to-run
  identity); resume from epoch 1 bitwise equal to the uninterrupted run; and, because the world
  has two ranks, NCCL's ring sum x0 + x1 equals the host path's rank-ordered sum, so dp (mlp and
  dlrm) with NCCL equals dp with --reduce host bitwise; mp moves activations with ncclSend/ncclRecv
  (exact copies), so mp with NCCL also equals mp with --reduce host bitwise.
"""
import json, os, shutil, subprocess, sys

ct, d, mpiexec, compare = sys.argv[1:5]
shutil.rmtree(d, ignore_errors=True)
os.makedirs(d)
common = ["--seed", "7", "--limit", "1024", "--test-limit", "500", "--batch", "64", "--device", "cuda"]
H = "ckpt-step00000032.h5"
M = "ckpt-step00000032.manifest.json"

def run(args, np=2, expect=0):
    p = subprocess.run([mpiexec, "-n", str(np), ct] + args, cwd=d, capture_output=True, text=True)
    print(p.stdout, end="")
    print(p.stderr, end="", file=sys.stderr)
    if p.returncode != expect:
        print(f"FAIL: {' '.join(args)} exited {p.returncode}, expected {expect}", file=sys.stderr)
        sys.exit(1)
    return p

def same(a, b):
    if subprocess.run([sys.executable, compare, os.path.join(d, a), os.path.join(d, b)]).returncode != 0:
        print(f"FAIL: {a} and {b} differ", file=sys.stderr)
        sys.exit(1)

def recorded_reduce(path):
    import h5py
    with h5py.File(os.path.join(d, path), "r") as f:
        cfg = f["meta"].attrs["config"]
    return json.loads(cfg if isinstance(cfg, str) else cfg.decode())["reduce"]

probe = subprocess.run([ct, "train", "--model", "mlp", "--seed", "7", "--limit", "64", "--test-limit", "10", "--epochs", "1",
                        "--device", "auto", "--ckpt-dir", "probe", "--summary", "probe.json"], cwd=d, capture_output=True, text=True)
dev = json.load(open(os.path.join(d, "probe.json"))).get("device", "") if probe.returncode == 0 else ""
if not dev.startswith("cuda"):
    print(f"no CUDA device (auto chose {dev!r}): skipped")
    sys.exit(77)

mlp_dp = ["train", "--model", "mlp", "--parallel", "dp", "--epochs", "2"] + common
first = subprocess.run([mpiexec, "-n", "2", ct] + mlp_dp + ["--reduce", "nccl", "--ckpt-dir", "try"], cwd=d, capture_output=True, text=True)
if first.returncode == 2 and "NCCL needs one GPU per rank" in first.stderr:
    print("ranks share a GPU: --reduce nccl refused as expected:", first.stderr.strip())
    run(mlp_dp + ["--reduce", "auto", "--ckpt-dir", "auto"])
    run(mlp_dp + ["--reduce", "host", "--ckpt-dir", "host"])
    if recorded_reduce(f"auto/{H}") != "host":
        print("FAIL: --reduce auto with a shared GPU did not record host", file=sys.stderr)
        sys.exit(1)
    same(f"auto/{H}", f"host/{H}")
    print("NCCL runs need one GPU per rank: skipped")
    sys.exit(77)
if first.returncode != 0:
    print(first.stdout + first.stderr, file=sys.stderr)
    print(f"FAIL: dp --reduce nccl exited {first.returncode}", file=sys.stderr)
    sys.exit(1)
print(first.stdout, end="")
if recorded_reduce(f"try/{H}") != "nccl":
    print("FAIL: the checkpoint does not record reduce nccl", file=sys.stderr)
    sys.exit(1)

dlrm = ["--optimizer", "adagrad", "--lr", "0.05", "--synthetic-samples", "4096"]
for name, model, mode, f, extra in (("mlp_dp", "mlp", "dp", H, []), ("mlp_mp", "mlp", "mp", M, []),
                                    ("cnn_mp", "cnn", "mp", M, ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]),
                                    ("dlrm_dp", "dlrm", "dp", H, dlrm)):
    args = ["train", "--model", model, "--parallel", mode] + common + extra
    for k in ("a", "b"):
        run(args + ["--epochs", "2", "--reduce", "nccl", "--ckpt-dir", f"{name}_{k}"])
    same(f"{name}_a/{f}", f"{name}_b/{f}")                     # run-to-run bit identity
    run(args + ["--epochs", "2", "--reduce", "host", "--ckpt-dir", f"{name}_host"])
    same(f"{name}_a/{f}", f"{name}_host/{f}")                  # 2 ranks: NCCL == host order
    if name in ("mlp_dp", "mlp_mp"):
        run(args + ["--epochs", "1", "--reduce", "nccl", "--ckpt-dir", f"{name}_r"])
        run(["resume", "--from", f"{name}_r/" + f.replace("00032", "00016"), "--epochs", "2", "--ckpt-dir", f"{name}_r"])
        same(f"{name}_a/{f}", f"{name}_r/{f}")                 # resume keeps NCCL and is bit-exact
    print(f"{name}: nccl repeatable, equal to host reduction" + (", resume bit-exact" if name.startswith("mlp") else ""))
print("nccl_train: OK")
