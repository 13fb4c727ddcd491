"""Hostile files in the formats PyTorch users have, one per directory: OUT/<case>/<file>, and
OUT/cases.tsv with one line per case: directory, file name, exit code, and a regular expression the
error line must match: the parser's own error, prefixed by the file."""
import io
import json
import os
import pickle
import struct
import sys
import zipfile

import numpy as np
import torch

out, marker = sys.argv[1], sys.argv[2]
cases = []


def case(name, filename, data, code, pattern):
    os.makedirs(f"{out}/{name}")
    if data is not None:
        with open(f"{out}/{name}/{filename}", "wb") as fh:
            fh.write(data)
    cases.append((name, filename, code, pattern))


# A real torch.save archive of a small model and its Adam state: the base of the zip cases.
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
opt = torch.optim.Adam(model.parameters())
model(torch.randn(5, 4)).sum().backward()
opt.step()
buf = io.BytesIO()
torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, buf)
pt = buf.getvalue()

case("truncated_zip", "model.pt", pt[: len(pt) * 3 // 5], 4, "no end of central directory")
cd = pt.rfind(b"PK\x01\x02", 0, pt.rfind(b"PK\x05\x06"))
case("bad_central_directory", "model.pt", pt[:cd] + b"PK\x01\x09" + pt[cd + 4:], 4, "central directory")


def archive(pkl):
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", pkl)
        zf.writestr("archive/version", "3\n")
    return z.getvalue()


class Evil:
    """Unpickled by anything that executes pickles, it runs `touch MARKER`."""

    def __reduce__(self):
        return (os.system, (f"touch {marker}",))


case("pickle_opcode", "model.pt", archive(pickle.dumps({"s": {1, 2}}, protocol=4)), 4, "outside the supported subset")
case("pickle_system", "model.pt", archive(pickle.dumps({"w": Evil()}, protocol=2)), 4, "posix.system")
# A bare pickle stream calling os.system (no zip around it): no format of ckpt-flip's.
case("bare_pickle_system", "model.pkl", pickle.dumps({"w": Evil()}, protocol=2), 4, "unknown file format|legacy|posix.system")
legacy = io.BytesIO()
torch.save(model.state_dict(), legacy, _use_new_zipfile_serialization=False)
case("legacy_torch", "model.pt", legacy.getvalue(), 4, "unknown file format|legacy")


def safetensors(entries):
    """entries: name -> (dtype, shape, data_offsets); data: as many bytes as the largest end."""
    header = {n: {"dtype": d, "shape": s, "data_offsets": o} for n, (d, s, o) in entries.items()}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    size = max(o[1] for _, _, o in entries.values())
    return struct.pack("<Q", len(text)) + text + bytes(size)


# A header whose offsets reach past the data (the data holds 32 bytes, "b" claims 32..96 of them).
lying = safetensors({"a": ("F32", [8], [0, 32]), "b": ("F32", [16], [32, 96])})
case("safetensors_offsets", "model.safetensors", lying[:-64], 4, "outside the")
case("safetensors_overlap", "model.safetensors", safetensors({"a": ("F32", [8], [0, 32]), "b": ("F32", [8], [16, 48])}), 4,
     "overlap")


def npz(members):
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return z.getvalue()


arr = io.BytesIO()
np.save(arr, np.arange(12, dtype="<f4"))
case("npz_member_not_npy", "arrays.npz", npz([("w.npy", arr.getvalue()), ("notes.txt", b"hello\n")]), 4, "not a .npy")
case("npz_member_garbage", "arrays.npz", npz([("w.npy", arr.getvalue()), ("x.npy", b"not an array at all")]), 4,
     "bad magic")
case("zero_length", "model.pt", b"", 4, "unknown file format|empty|too short")
case("directory", "model.pt", None, 3, "regular file|directory")
os.mkdir(f"{out}/directory/model.pt")
case("fifo", "model.safetensors", None, 3, "regular file|FIFO")
os.mkfifo(f"{out}/fifo/model.safetensors")

with open(f"{out}/cases.tsv", "w") as fh:
    for c in cases:
        fh.write("\t".join(map(str, c)) + "\n")
