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
# Bytes appended after the archive's end record: torch.load reads the archive; refused, saying so.
case("zip_trailing_bytes", "model.pt", pt + bytes(100), 4, "100 bytes after the end of the archive")
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


case("pickle_opcode", "model.pt", archive(b"\x80\x02(c__main__\nX\ni."), 4, "opcode INST \\(0x69 'i'\\)")


def saved(obj):
    b = io.BytesIO()
    torch.save(obj, b)
    return b.getvalue()


# An object that would run a command when unpickled is read as an opaque value; this file is still
# refused, for a storage no tensor views (its bytes could not be placed in the fault space).
case("pickle_system", "model.pt", saved({"evil": Evil(), "s": torch.ones(2).storage()}), 4, "a storage that no tensor rebuild function views")
# A tensor used as a dict key: its storage is in the archive, but dict keys name things, they are not walked.
case("torch_tensor_dict_key", "model.pt", saved({"k": {torch.ones(2): torch.zeros(3)}}), 4,
     "data/[01]' is a storage no tensor of the saved object views")
# A bare pickle stream calling os.system (no zip around it): not a legacy torch.save file.
case("bare_pickle_system", "model.pkl", pickle.dumps({"w": Evil()}, protocol=2), 4, "torch's magic number")
legacy = io.BytesIO()
torch.save(model.state_dict(), legacy, _use_new_zipfile_serialization=False)
case("legacy_torch_truncated", "model.pt", legacy.getvalue()[:-3], 4, "runs past the end of the file")


def with_members(pt_bytes, members):
    """The archive `pt_bytes` with members {name after the archive's prefix: bytes} added or replaced, stored."""
    src, dst = zipfile.ZipFile(io.BytesIO(pt_bytes)), io.BytesIO()
    prefix = src.namelist()[0].split("/")[0] + "/"
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zf:
        for info in src.infolist():
            if info.filename[len(prefix):] not in members:
                zf.writestr(info.filename, src.read(info))
        for name, data in members.items():
            zf.writestr(prefix + name, data)
    return dst.getvalue()


def with_pickle(pt_bytes, edit):
    """The archive `pt_bytes` with its data.pkl replaced by edit(data.pkl), every other member as it was."""
    src, dst = zipfile.ZipFile(io.BytesIO(pt_bytes)), io.BytesIO()
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zf:
        for info in src.infolist():
            data = src.read(info)
            zf.writestr(info.filename, edit(data) if info.filename.endswith("/data.pkl") else data)
    return dst.getvalue()


# <archive>/byteorder other than little or big.
case("torch_byteorder_bad", "model.pt", with_members(pt, {"byteorder": b"middle"}), 4, "neither 'little' nor 'big'")
# One name for two tensors (each of its own storage): dict keys are joined by '/', integer keys are
# written in decimal, an empty path is "tensor", and a pickle may repeat a key (torch.load keeps the
# last value). A name must say which tensor a flip log means: the file is refused, naming it.
two = ": a second tensor with this name"
case("torch_name_slash", "model.pt", saved({"model": {"a/b": torch.ones(3), "a": {"b": torch.zeros(5)}}}), 4,
     "'model/a/b'" + two)
case("torch_name_int_key", "model.pt", saved({"model": {1: torch.ones(3), "1": torch.zeros(5)}}), 4, "'model/1'" + two)
case("torch_name_empty_key", "model.pt", saved({"": torch.ones(3), "tensor": torch.zeros(5)}), 4, "'tensor'" + two)
repeated = with_pickle(saved({"model": {"key_aaaa": torch.ones(3), "key_bbbb": torch.zeros(5)}}),
                       lambda pkl: pkl.replace(b"key_bbbb", b"key_aaaa"))
case("torch_name_repeated_key", "model.pt", repeated, 4, "'model/key_aaaa'" + two)


def zip64_record_at(pt):
    """The zip64 locator's offset in `pt` and the zip64 record's offset it names."""
    loc = pt.rfind(b"PK\x05\x06") - 20
    assert pt[loc:loc + 4] == b"PK\x06\x07"
    return loc, struct.unpack_from("<Q", pt, loc + 8)[0]


# The zip64 end record copied into a tensor's bytes (the tensor's values are those bytes, so every
# CRC holds and torch.load reads the file) and the locator pointing at the copy: an edit of the
# tensor would change archive metadata. Refused: the record must follow the central directory.
loc, off = zip64_record_at(saved({"model": {"w": torch.zeros(64)}}))
record = saved({"model": {"w": torch.zeros(64)}})[off:off + 56]
holder = bytearray(saved({"model": {"w": torch.frombuffer(bytearray(record + bytes(200)), dtype=torch.float32).clone()}}))
info = zipfile.ZipFile(io.BytesIO(bytes(holder))).getinfo("archive/data/0")
data = info.header_offset + 30 + sum(struct.unpack_from("<HH", holder, info.header_offset + 26))
assert holder[data:data + 56] == record and zip64_record_at(holder)[1] == off
struct.pack_into("<Q", holder, loc + 8, data)
case("zip64_record_in_tensor", "model.pt", bytes(holder), 4, "zip64 end of central directory record at offset [0-9]+ lies before")


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

# A safetensors key that is not UTF-8 (RFC 8259: JSON text exchanged between systems is UTF-8).
bad_utf8 = b'{"w\xff\xfe": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'
bad_utf8 += b" " * (-len(bad_utf8) % 8)
case("safetensors_not_utf8", "model.safetensors", struct.pack("<Q", len(bad_utf8)) + bad_utf8 + bytes(8), 4,
     "string is not valid UTF-8")


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
