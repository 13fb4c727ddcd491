#!/usr/bin/python3
"""A mixed-precision gpt checkpoint holds what such a checkpoint holds, with the dtypes recorded:

  gpt_bf16_checkpoint.py CKPT

/model/<p> are bfloat16 datasets (uint16 words marked resil_dtype = bf16), /optimizer/<p>/master,
exp_avg and exp_avg_sq are float32, the configuration says precision bf16, and every model weight
is its float master rounded to bfloat16 (to nearest, ties to even), bit for bit.
"""
import json
import sys

import h5py
import numpy as np


def to_bf16_words(x):
    """float32 -> bfloat16 words, to nearest, ties to even (finite values)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


bad = []
with h5py.File(sys.argv[1], "r") as f:
    cfg = json.loads(f["meta"].attrs["config"])
    if cfg["gpt"]["precision"] != "bf16":
        bad.append(f"config precision {cfg['gpt']['precision']}")
    for name, d in f["model"].items():
        if d.dtype != np.uint16 or d.attrs.get("resil_dtype") not in (b"bf16", "bf16"):
            bad.append(f"/model/{name} is {d.dtype} (resil_dtype {d.attrs.get('resil_dtype')})")
            continue
        slots = f["optimizer"][name]
        for s in ("master", "exp_avg", "exp_avg_sq"):
            if slots[s].dtype != np.float32:
                bad.append(f"/optimizer/{name}/{s} is {slots[s].dtype}")
        n = int(np.count_nonzero(to_bf16_words(slots["master"][()]) != d[()]))
        if n:
            bad.append(f"/model/{name}: {n} words are not the master rounded to bf16")
    count = len(f["model"])
print(f"{sys.argv[1]}: {count} bf16 model weights with float masters and moments: {'OK' if not bad else 'FAIL'}")
for b in bad:
    print("  " + b)
sys.exit(1 if bad else 0)
