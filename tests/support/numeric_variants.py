"""Environments that must not change a single bit of resil's CPU results: OpenBLAS's kernel
override (some clusters and images set it), thread-count variables, and resil's own portable GEMM
path instead of the AVX2 one. Shared by the pinned-result tests of ckpt-train and ec-train.

variant(name) -> (environment, extra ckpt-train/ec-train arguments), or a reason it cannot run here.
"""
import os

# OpenBLAS kernel names and the /proc/cpuinfo flag each needs to run at all (pni is SSE3).
CORETYPES = {"Prescott": "pni", "Sandybridge": "avx", "Haswell": "avx2", "Zen": "avx2", "SkylakeX": "avx512f"}
NAMES = ["default", "scalar", "threads"] + ["coretype-" + k for k in CORETYPES]


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def variant(name):
    """(env, extra_args) for a variant, or a string saying why this CPU cannot run it."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "RESIL_GEMM_PATH")}
    if name == "default":
        return env, []
    if name == "scalar":
        env["RESIL_GEMM_PATH"] = "scalar"
        return env, []
    if name == "threads":
        env.update(OPENBLAS_NUM_THREADS="3", OMP_NUM_THREADS="3")
        return env, ["--threads", "2"]
    if name.startswith("coretype-"):
        core = name[len("coretype-"):]
        need = CORETYPES[core]
        if need not in cpu_flags():
            return f"this CPU lacks {need}, which OpenBLAS's {core} kernels need"
        env["OPENBLAS_CORETYPE"] = core
        return env, []
    raise SystemExit(f"unknown variant {name!r} (one of {', '.join(NAMES)})")


def compare(got, pinned, vname, record):
    """Print each result against its pinned value (or, with record, as a PINNED table line); exit
    non-zero naming how many differ. got and pinned map a name to a tuple of strings."""
    bad = 0
    for name, value in got.items():
        shown = " ".join(value)
        if record:
            print(f'    "{name}": ({", ".join(chr(34) + v + chr(34) for v in value)}),')
        elif pinned.get(name) != value:
            bad += 1
            print(f"FAIL: {name} under {vname}: {shown}; pinned {' '.join(pinned.get(name, ('(none)',)))}")
        else:
            print(f"ok: {name} under {vname}: {shown}")
    if bad:
        raise SystemExit(f"FAIL: {bad} of {len(got)} results differ from the pinned values under variant {vname}")
