#!/usr/bin/python3
"""Compare the /model and /optimizer datasets of two ckpt-train checkpoints (files or mp manifests).

  compare_ckpt.py A B            bit-identical (raw bytes) or exit 1
  compare_ckpt.py A B --tol T    max |a-b| / (1 + |a|) <= T for every element
  compare_ckpt.py A B --tol T --bf16-ulps N   ... and bf16 datasets at most N units in the last place apart
  compare_ckpt.py --summary S --min-acc X   summary JSON test_accuracy >= X (convergence)
  compare_ckpt.py --summary S --max-value X --key K   summary JSON K <= X (a loss)
"""
import argparse, json, os, sys
import h5py, numpy as np

def shards(path):
    if path.endswith(".manifest.json"):
        m = json.load(open(path))
        return [os.path.join(os.path.dirname(path), s) for s in m["shards"]]
    return [path]

BF16 = set()  # names of the bf16 datasets


def ulps_apart(a, b):
    """Units in the last place between bf16 values held as floats (same sign: ordered as integers)."""
    ia = (a.view(np.uint32) >> 16).astype(np.int64)
    ib = (b.view(np.uint32) >> 16).astype(np.int64)
    ia = np.where(ia >= 0x8000, 0x8000 - ia, ia)  # sign-magnitude to an ordered integer line
    ib = np.where(ib >= 0x8000, 0x8000 - ib, ib)
    return int(np.max(np.abs(ia - ib))) if a.size else 0


def datasets(path):
    """Every /model and /optimizer dataset as float arrays; a tp shard's slice (its resil_tp_slice
    attribute) is put into its place in the global tensor, so tp checkpoints compare with serial ones."""
    out, sliced = {}, set()
    for f in shards(path):
        with h5py.File(f, "r") as h:
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset) and (name.startswith("model/") or name.startswith("optimizer/")):
                    v = obj[()]
                    if obj.attrs.get("resil_dtype") in (b"bf16", "bf16"):  # bfloat16 words: the upper half of a float
                        BF16.add(name)
                        v = (v.astype(np.uint32) << 16).view(np.float32)
                    sl = obj.attrs.get("resil_tp_slice")
                    if sl is None:
                        # a parameter two shards hold (a gpt pipeline's wte) must be the same bits in both
                        if name in out and not (out[name].shape == v.shape and out[name].tobytes() == v.tobytes()):
                            sys.exit(f"{path}: {name}: the shards' copies differ")
                        out[name] = v
                        return
                    sl = json.loads(sl)
                    sliced.add(name)
                    g = out.setdefault(name, np.full(sl["global_shape"], np.nan, dtype=v.dtype))
                    idx = np.concatenate([np.arange(lo, hi) for lo, hi in sl["ranges"]])
                    g[(slice(None),) * sl["dim"] + (idx,)] = v
            h.visititems(visit)
    for name in sliced:  # an element no shard's slice held stays NaN
        if np.isnan(out[name]).any():
            sys.exit(f"{path}: {name}: the shards' slices do not cover the tensor")
    return out

ap = argparse.ArgumentParser()
ap.add_argument("a", nargs="?")
ap.add_argument("b", nargs="?")
ap.add_argument("--tol", type=float)
ap.add_argument("--summary")
ap.add_argument("--min-acc", type=float)
ap.add_argument("--max-value", type=float)
ap.add_argument("--bf16-ulps", type=int)
ap.add_argument("--key", default="test_accuracy")
args = ap.parse_args()
if args.summary:
    s = json.load(open(args.summary))
    print(f"{args.summary}: {args.key} = {s[args.key]}")
    if args.max_value is not None:
        sys.exit(0 if s[args.key] <= args.max_value else 1)
    sys.exit(0 if s[args.key] >= args.min_acc else 1)
A, B = datasets(args.a), datasets(args.b)
if sorted(A) != sorted(B):
    print("dataset sets differ:", sorted(set(A) ^ set(B)))
    sys.exit(1)
if not A:
    print("no /model datasets found")
    sys.exit(1)
bad = 0
for k in sorted(A):
    a, b = A[k], B[k]
    if a.shape != b.shape:
        print(f"{k}: shape {a.shape} vs {b.shape}"); bad += 1; continue
    if args.tol is None:
        raw = np.dtype(f"u{a.dtype.itemsize}")
        n = int(np.count_nonzero(a.view(raw) != b.view(raw)))
        if n:
            print(f"{k}: {n} of {a.size} elements differ bitwise"); bad += 1
    elif k in BF16 and args.bf16_ulps is not None:
        u = ulps_apart(a, b)
        if u > args.bf16_ulps:
            print(f"{k}: {u} bf16 units in the last place apart > {args.bf16_ulps}"); bad += 1
    else:
        err = float(np.max(np.abs(a.astype(np.float64) - b) / (1.0 + np.abs(a)))) if a.size else 0.0
        if not err <= args.tol:
            print(f"{k}: max relative difference {err:.3g} > {args.tol}"); bad += 1
print(f"compared {len(A)} datasets: {'OK' if not bad else str(bad) + ' differ'}")
sys.exit(1 if bad else 0)
