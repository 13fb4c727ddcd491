#!/usr/bin/python3
"""GPU end-to-end checks of ckpt-train --device (CTest label gpu; exit 77 = skipped without a GPU).

  gpu_train.py CKPT_TRAIN DIR [MPIEXEC]

1. GPU run-to-run bit-identity: two 2-epoch cuda runs end with bitwise equal checkpoints.
2. GPU resume bit-exactness: 1 epoch on cuda + resume to 2 == the 2-epoch cuda run, bitwise.
3. Cross-device resume: a CPU checkpoint resumes on cuda and a cuda checkpoint on cpu; both end
   within 1e-3 relative of the all-CPU run (kernels differ in summation order, not in the model).
4. With MPIEXEC: dp and mp with 2 ranks on the GPU(s) (ranks may share one), repeatable bitwise.
"""
import json, os, shutil, subprocess, sys

ct, d = sys.argv[1], sys.argv[2]
mpiexec = sys.argv[3] if len(sys.argv) > 3 else None
here = os.path.dirname(os.path.abspath(__file__))
shutil.rmtree(d, ignore_errors=True)
os.makedirs(d)
common = ["--model", "mlp", "--seed", "7", "--limit", "1024", "--test-limit", "500", "--batch", "64"]

def run(args, np=1, ok=True):
    pre = [mpiexec, "-n", str(np)] if np > 1 else []
    p = subprocess.run(pre + [ct] + args, cwd=d, capture_output=True, text=True)
    print(p.stdout, end="")
    print(p.stderr, end="", file=sys.stderr)
    if ok and p.returncode != 0:
        print(f"FAIL: {' '.join(args[:3])}... exited {p.returncode}", file=sys.stderr)
        sys.exit(1)
    return p

def same(a, b, tol=None):
    cmd = [sys.executable, os.path.join(here, "compare_ckpt.py"), os.path.join(d, a), os.path.join(d, b)]
    if tol:
        cmd += ["--tol", str(tol)]
    if subprocess.run(cmd).returncode != 0:
        print(f"FAIL: {a} vs {b}", file=sys.stderr)
        sys.exit(1)

probe = run(["train", "--model", "mlp", "--seed", "7", "--limit", "64", "--test-limit", "10", "--epochs", "1", "--device", "auto", "--ckpt-dir", "probe",
                                  "--summary", "probe.json"])
dev = json.load(open(os.path.join(d, "probe.json"))).get("device", "")
if not dev.startswith("cuda"):
    print(f"no CUDA device (auto chose {dev!r}): skipped")
    sys.exit(77)
print("device:", dev)
H = "ckpt-step00000032.h5"
run(["train"] + common + ["--epochs", "2", "--device", "cuda", "--ckpt-dir", "g1"])
run(["train"] + common + ["--epochs", "2", "--device", "cuda", "--ckpt-dir", "g2"])
same(f"g1/{H}", f"g2/{H}")
run(["train"] + common + ["--epochs", "1", "--device", "cuda", "--ckpt-dir", "g3"])
run(["resume", "--from", "g3/ckpt-step00000016.h5", "--epochs", "2", "--ckpt-dir", "g3"])
same(f"g1/{H}", f"g3/{H}")
run(["train"] + common + ["--epochs", "2", "--device", "cpu", "--ckpt-dir", "c1"])
run(["train"] + common + ["--epochs", "1", "--device", "cpu", "--ckpt-dir", "c2"])
run(["resume", "--from", "c2/ckpt-step00000016.h5", "--epochs", "2", "--device", "cuda", "--ckpt-dir", "c2"])
same(f"c1/{H}", f"c2/{H}", 1e-3)
run(["resume", "--from", "g3/ckpt-step00000016.h5", "--epochs", "2", "--device", "cpu", "--ckpt-dir", "g4"])
same(f"c1/{H}", f"g4/{H}", 1e-3)
if mpiexec:
    for mode, f in (("dp", H), ("mp", "ckpt-step00000032.manifest.json")):
        for k in ("a", "b"):
            run(["train"] + common + ["--epochs", "2", "--device", "cuda", "--parallel", mode, "--ckpt-dir", f"{mode}{k}"], np=2)
        same(f"{mode}a/{f}", f"{mode}b/{f}")
        same(f"c1/{H}", f"{mode}a/{f}", 1e-3)
print("gpu_train: OK")
