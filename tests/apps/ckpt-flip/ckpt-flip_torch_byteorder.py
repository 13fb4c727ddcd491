#!/usr/bin/python3
"""A torch.save archive written on a big-endian machine (`<archive>/byteorder` says "big", the storages'
elements big-endian, as torch.save writes them on s390x or ppc64; made here from a little-endian save by
swapping each storage and adding the record): ckpt-flip reads its values as torch.load does (numpy's
'>f4' the independent reader), a --bits sign flip negates exactly one element and changes no other byte
of any storage, the member's CRC-32 stays valid (zipfile), scan calls it clean, and revert restores the
file byte for byte. argv: ckpt-flip binary, scratch dir."""
import io, json, os, zipfile

import numpy as np
import torch

from ckpt_flip_pytest import T, fail, flip, sha

values = {"w": np.array([1.0, 2.0, -3.0, 0.5, 7.25, -0.125], dtype=np.float32), "h": np.array([1.5, -2.0, 3.0], dtype=np.float16)}
buf = io.BytesIO()
torch.save({k: torch.from_numpy(v) for k, v in values.items()}, buf)
src = zipfile.ZipFile(buf)
prefix = src.namelist()[0].split("/")[0] + "/"
pkl_keys = {}  # storage member -> tensor name (told apart by their byte counts)
be = f"{T}/be.pt"
with zipfile.ZipFile(be, "w", zipfile.ZIP_STORED) as out:
    for info in src.infolist():
        data = src.read(info)
        if info.filename.startswith(prefix + "data/"):
            k = "w" if len(data) == values["w"].nbytes else "h"
            data = np.frombuffer(data, values[k].dtype.newbyteorder("<")).astype(values[k].dtype.newbyteorder(">")).tobytes()
            pkl_keys[info.filename] = k
        if info.filename != prefix + "byteorder":
            out.writestr(info.filename, data)
    out.writestr(prefix + "byteorder", b"big")
if sorted(pkl_keys.values()) != ["h", "w"]:
    fail(f"storages {pkl_keys}")
before = sha(be)


def stored(path):
    """{tensor name: its values read big-endian from the archive}"""
    z = zipfile.ZipFile(path)
    if z.testzip() is not None:
        fail(f"{path}: a member's CRC-32 is wrong")
    return {k: np.frombuffer(z.read(m), values[k].dtype.newbyteorder(">")).astype(values[k].dtype) for m, k in pkl_keys.items()}


# scan reads the values as they are: plain small numbers, nothing suspect (read little-endian, 1.0f is
# 4.6e-41, a subnormal).
flip("scan", be)
flip("inject", be, "-o", f"{T}/be-flipped.pt", "--seed", "4", "--flips", "1", "--bits", "sign", "--include", "/w", "--log", f"{T}/be.jsonl")
a, b = stored(be), stored(f"{T}/be-flipped.pt")
if not np.array_equal(a["h"], b["h"]):
    fail("the fp16 storage changed")
diff = np.nonzero(a["w"] != b["w"])[0]
if len(diff) != 1 or b["w"][diff[0]] != -a["w"][diff[0]]:
    fail(f"a sign flip of /w, read big-endian: {a['w']} -> {b['w']}")
rec = [json.loads(l) for l in open(f"{T}/be.jsonl") if '"index"' in l]
if len(rec) != 1 or rec[0]["index"] != int(diff[0]):
    fail(f"the log's record {rec} is not element {diff[0]}")
old = float(values["w"][diff[0]])
flip("revert", f"{T}/be-flipped.pt", "--log", f"{T}/be.jsonl")
if sha(f"{T}/be-flipped.pt") != before:
    fail("revert did not restore the big-endian archive byte for byte")
print(f"big-endian torch.save: element {diff[0]} of /w {old} -> {-old}, fp16 untouched, revert exact")
