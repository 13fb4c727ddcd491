#!/usr/bin/python3
"""The format parsers against what PyTorch and NumPy report, on files they wrote, and on hostile
files: usage formats_check.py FORMAT_DUMP. Real torch.save archives (Debian's torch 1.13: typed
storages; a CNN with BatchNorm and its Adam state, tied weights, f16/bf16, a view, a Parameter),
NumPy's np.save/np.savez/np.savez_compressed, and safetensors files from a small writer here.
Every tensor's bytes at the parsed offset must equal tensor.numpy().tobytes()."""
import argparse
import atexit
import io
import random
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import torch

DUMP = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="resil_formats_")
atexit.register(shutil.rmtree, TMP, ignore_errors=True)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def dump(kind, path):
    r = subprocess.run([DUMP, kind, path], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"{kind} {path}: rc {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def refused(kind, path, needle, label):
    r = subprocess.run([DUMP, kind, path], capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    ok = r.returncode == 4 and len(lines) == 1 and needle in lines[0] and lines[0].startswith("format_dump: error: ")
    check(ok, f"{label}: expected exit 4 and one line with {needle!r}, got rc {r.returncode}: {r.stderr!r}")


def path(name):
    return os.path.join(TMP, name)


def flatten(obj, prefix=""):
    """Tensors of a saved object under the parser's naming: dict paths joined by '/'."""
    if isinstance(obj, torch.Tensor):
        yield prefix or "tensor", obj
    elif isinstance(obj, argparse.Namespace):
        yield from flatten(vars(obj), prefix)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}/{k}" if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from flatten(v, f"{prefix}/{i}" if prefix else str(i))


DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
          torch.bool: "BOOL"}


def raw(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def check_torch(obj, file, label, roles=None, **save):
    torch.save(obj, file, **save)
    d = dump("torch", file)
    legacy = save.get("_use_new_zipfile_serialization") is False
    check(d["legacy"] == legacy, f"{label}: legacy flag {d['legacy']}")
    data = open(file, "rb").read()
    want = dict(flatten(obj))
    got = {t["name"]: t for t in d["tensors"]}
    check(sorted(want) == sorted(got), f"{label}: names {sorted(got)} != {sorted(want)}")
    storages = {s["key"]: s for s in d["storages"]}
    for name, t in want.items():
        g = got.get(name)
        if g is None:
            continue
        where = f"{label}: {name}"
        check(g["dtype"] == DTYPES[t.dtype], f"{where}: dtype {g['dtype']}")
        check(g["shape"] == list(t.shape) and g["stride"] == list(t.stride()), f"{where}: shape/stride {g['shape']} {g['stride']}")
        check(g["offset"] == t.storage_offset(), f"{where}: storage offset {g['offset']} != {t.storage_offset()}")
        check(g["requires_grad"] == t.requires_grad, f"{where}: requires_grad")
        s = storages[g["key"]]
        size = t.element_size()
        check(s["size"] == s["numel"] * size, f"{where}: storage size")
        if t.is_contiguous():
            start = s["data_offset"] + g["offset"] * size
            check(data[start:start + t.numel() * size] == raw(t), f"{where}: bytes at the parsed offset differ")
        if roles:
            check(g["role"] == roles(name), f"{where}: role {g['role']}")
    if legacy:
        return d
    with zipfile.ZipFile(file) as z:
        for s in d["storages"]:
            info = z.getinfo(s["entry"]["name"])
            check(info.CRC == s["entry"]["crc"] and info.file_size == s["entry"]["size"], f"{label}: {info.filename} crc/size")
    return d


# --- torch.save archives -------------------------------------------------------------------------
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(),
                          torch.nn.Linear(4 * 6 * 6, 10))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for _ in range(2):
    opt.zero_grad()
    net(torch.randn(5, 1, 8, 8)).sum().backward()
    opt.step()
d = check_torch({"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 7}, path("cnn.pt"), "cnn",
                roles=lambda n: n.split("/")[0])
counters = sorted(t["name"] for t in d["tensors"] if t["counter"])
check(counters == sorted(["model/1.num_batches_tracked"] + [f"optimizer/state/{i}/step" for i in range(6)]), f"cnn: counters {counters}")
check({"name": "epoch", "role": "other", "value": 7} in d["scalars"], "cnn: epoch scalar")
check(d["prefix"] == "cnn/", f"cnn: prefix {d['prefix']}")

check_torch(net.state_dict(), path("bare.pt"), "bare state_dict", roles=lambda n: "model")
check_torch(opt.state_dict(), path("opt.pt"), "bare optimizer", roles=lambda n: "optimizer")


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(6, 4)
        self.out = torch.nn.Linear(4, 6, bias=False)
        self.out.weight = self.emb.weight


d = check_torch(Tied().state_dict(), path("tied.pt"), "tied")
keys = {t["name"]: t["key"] for t in d["tensors"]}
check(keys["emb.weight"] == keys["out.weight"] and len(d["storages"]) == 1, f"tied: one storage expected, {keys}")

base = torch.arange(12, dtype=torch.float32)
mixed = {"h": torch.randn(3, 5).half(), "b": torch.randn(7).bfloat16(), "view": base[4:10].view(2, 3), "base": base,
         "t": torch.randn(3, 4).t(), "i8": torch.arange(-4, 4, dtype=torch.int8), "u8": torch.arange(5, dtype=torch.uint8),
         "mask": torch.tensor([True, False, True]), "i32": torch.tensor(3, dtype=torch.int32),
         "p": torch.nn.Parameter(torch.randn(2, 2)), "list": [torch.ones(2, dtype=torch.float64), (torch.zeros(1, dtype=torch.int16),)]}
d = check_torch(mixed, path("mixed.pt"), "mixed")
got = {t["name"]: t for t in d["tensors"]}
check(got["view"]["key"] == got["base"]["key"] and got["view"]["offset"] == 4, "mixed: the view shares its base's storage at offset 4")
check(got["i32"]["counter"] and not got["h"]["counter"], "mixed: a 0-d integer tensor is a counter")
check_torch(torch.randn(3), path("single.pt"), "single tensor")

# Lightning's checkpoint layout: state_dict is the model, optimizer_states a list of optimizer state_dicts.
sched = torch.optim.lr_scheduler.StepLR(opt, 2)
lightning = {"epoch": 3, "global_step": 120, "pytorch-lightning_version": "2.4.0", "state_dict": net.state_dict(),
             "loops": {"fit_loop": {"epoch_progress": {"total": {"ready": 3}}}}, "callbacks": {"ModelCheckpoint": {"best_model_score": torch.tensor(0.25)}},
             "optimizer_states": [opt.state_dict()], "lr_schedulers": [sched.state_dict()], "hparams_name": "kwargs", "hyper_parameters": {"lr": 1e-3}}
d = check_torch(lightning, path("lightning.ckpt"), "lightning",
                roles=lambda n: {"state_dict": "model", "optimizer_states": "optimizer"}.get(n.split("/")[0], "other"))
counters = sorted(t["name"] for t in d["tensors"] if t["counter"])
check(counters == sorted(["state_dict/1.num_batches_tracked"] + [f"optimizer_states/0/state/{i}/step" for i in range(6)]), f"lightning: counters {counters}")

# Every pickle torch.save writes: protocols 2 to 5, zip and legacy, with objects outside the tensor
# subset beside the tensors (read as opaque values, never constructed).
np.random.seed(0)
world = {"model": net.state_dict(), "optimizer": opt.state_dict(), "args": argparse.Namespace(lr=0.1, depth=3, w=torch.ones(2)),
         "best_acc": np.float64(0.93), "step": np.int64(5), "hist": np.arange(4.0), "rng": np.random.get_state(),
         "python_rng": random.getstate(), "cpu_rng": torch.random.get_rng_state(), "when": {(1, 2): torch.zeros(3), True: torch.ones(1), ("adam", 0): torch.ones(2), ("it's", 'say "x"', "a\\b\tc\x01\u0085é"): torch.ones(1),
                  0.1: torch.ones(1), 2.0: torch.ones(1), (1e16, -0.0, 1e-05, 123.5, None, False): torch.ones(1)}}
for protocol in (2, 3, 4, 5):
    for zipped in (True, False):
        label = f"protocol {protocol} {'zip' if zipped else 'legacy'}"
        d = check_torch(world, path(f"world{protocol}{zipped}.pt"), label, pickle_protocol=protocol, _use_new_zipfile_serialization=zipped)
        types = {o["name"]: o["type"] for o in d["opaque"]}
        array = "._frombuffer" if protocol == 5 else "._reconstruct"  # numpy pickles arrays out of band from protocol 5
        check(types.get("args") == "argparse.Namespace" and types.get("best_acc", "").endswith("multiarray.scalar")
              and types.get("hist", "").endswith(array) and types.get("rng/1", "").endswith(array),
              f"{label}: opaque objects {types}")
        check(d["prefix"] == ("" if not zipped else f"world{protocol}{zipped}/"), f"{label}: prefix {d['prefix']}")

# --- hostile torch archives ----------------------------------------------------------------------
cnn = open(path("cnn.pt"), "rb").read()
open(path("cut.pt"), "wb").write(cnn[: len(cnn) // 2])
refused("torch", path("cut.pt"), "zip: no end of central directory", "truncated zip")
cd = cnn.rfind(b"PK\x01\x02", 0, cnn.rfind(b"PK\x05\x06"))
open(path("badcd.pt"), "wb").write(cnn[:cd] + b"PX" + cnn[cd + 2:])
refused("torch", path("badcd.pt"), "bad central directory entry signature", "bad central directory")
bad_offset = bytearray(cnn)
struct.pack_into("<Q", bad_offset, cnn.rfind(b"PK\x06\x06") + 48, len(cnn))  # zip64 central directory offset past the end
open(path("badoffset.pt"), "wb").write(bytes(bad_offset))
refused("torch", path("badoffset.pt"), "lies outside the file", "zip64 central directory offset out of range")


def archive(name, pkl):
    with zipfile.ZipFile(path(name), "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/version", "3\n")
    return path(name)


marker = path("executed")


class Evil:
    def __reduce__(self):
        return (os.system, (f"touch {marker}",))


small = open(archive("small.pt", pickle.dumps({}, protocol=2)), "rb").read()
bad_offset = bytearray(small)
struct.pack_into("<I", bad_offset, small.rfind(b"PK\x05\x06") + 16, len(small) - 1)
open(path("badoffset32.pt"), "wb").write(bytes(bad_offset))
refused("torch", path("badoffset32.pt"), "lies outside the file", "central directory offset out of range")
# A pickle that would call os.system when unpickled: read as an opaque value, never called; the tensor beside it is found.
torch.save({"w": torch.ones(2), "evil": Evil()}, path("evil.pt"))  # saving calls nothing; unpickling would
d = dump("torch", path("evil.pt"))
check([t["name"] for t in d["tensors"]] == ["w"] and [(o["name"], o["type"]) for o in d["opaque"]] == [("evil", "posix.system")], f"os.system pickle: {d}")
check(not os.path.exists(marker), "os.system pickle: something was executed")
bare = path("bare_evil.pkl")
open(bare, "wb").write(pickle.dumps({"w": Evil()}, protocol=2))
refused("torch", bare, "a bare pickle that does not start with torch's magic number", "bare pickle")
check(not os.path.exists(marker), "bare os.system pickle: something was executed")
refused("torch", archive("inst.pt", b"\x80\x02(c__main__\nX\ni."), "opcode INST (0x69 'i') is protocol 0/1 text form", "INST opcode")
refused("torch", archive("ext.pt", b"\x80\x02\x82\x01."), "opcode EXT1 (0x82)", "EXT1 opcode")
refused("torch", archive("buffer.pt", b"\x80\x05\x97."), "opcode NEXT_BUFFER (0x97)", "out-of-band buffer")
storage_only = path("storage.pt")
torch.save({"s": torch.ones(2).storage()}, storage_only)
refused("torch", storage_only, "a storage that no tensor rebuild function views", "a bare storage")
legacy = open(path("world2False.pt"), "rb").read()
open(path("legacy_cut.pt"), "wb").write(legacy[:-3])
refused("torch", path("legacy_cut.pt"), "runs past the end of the file", "truncated legacy file")
open(path("legacy_long.pt"), "wb").write(legacy + b"\0")
refused("torch", path("legacy_long.pt"), "1 bytes after the last storage", "legacy file with trailing bytes")
with zipfile.ZipFile(path("cnn.pt")) as src, zipfile.ZipFile(path("missing.pt"), "w") as dst:
    for info in src.infolist():
        if not info.filename.endswith("/data/0"):
            dst.writestr(info.filename, src.read(info))
refused("torch", path("missing.pt"), "storage '0' has no entry 'cnn/data/0'", "missing storage entry")
with zipfile.ZipFile(path("deflated.pt"), "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("archive/data.pkl", pickle.dumps({}, protocol=2))
refused("torch", path("deflated.pt"), "'archive/data.pkl' is compressed", "deflated pickle")

# --- zip structure: torch's zip64 + data descriptors, and Python's zipfile -----------------------
z = dump("zip", path("cnn.pt"))
check(z["zip64"] and all(e["descriptor"] for e in z["entries"]), "torch archive: zip64 directory with data descriptors")
for e in z["entries"]:
    check(cnn[e["local_crc_offset"]:e["local_crc_offset"] + 4] == struct.pack("<I", e["crc"]), f"zip: {e['name']} local CRC field")
    check(cnn[e["central_crc_offset"]:e["central_crc_offset"] + 4] == struct.pack("<I", e["crc"]), f"zip: {e['name']} central CRC field")

# --- NumPy ---------------------------------------------------------------------------------------
arrays = {"f8": np.linspace(0, 1, 7), "f4": np.arange(12, dtype="<f4").reshape(3, 4), "f2": np.ones(5, "<f2"),
          "i8": np.arange(-3, 3, dtype="<i8"), "i4": np.arange(4, dtype="<i4"), "i2": np.arange(6, dtype="<i2").reshape(2, 3),
          "i1": np.arange(-2, 2, dtype="i1"), "u1": np.arange(9, dtype="u1"), "b1": np.array([True, False]),
          "be": np.arange(6, dtype=">f4"), "fortran": np.asfortranarray(np.arange(6, dtype="<f8").reshape(2, 3)),
          "scalar": np.array(2.5, "<f4"), "empty": np.zeros((0, 3), "<f4")}
NAMES = {"f8": "F64", "f4": "F32", "f2": "F16", "i8": "I64", "i4": "I32", "i2": "I16", "i1": "I8", "u1": "U8", "b1": "BOOL"}
for name, a in arrays.items():
    f = path(name + ".npy")
    np.save(f, a)
    h = dump("npy", f)
    blob = open(f, "rb").read()
    check(h["dtype"] == NAMES[a.dtype.str[1:]] and h["shape"] == list(a.shape), f"npy {name}: {h}")
    check(h["big_endian"] == (a.dtype.byteorder == ">") and h["fortran_order"] == (name == "fortran"), f"npy {name}: order flags")
    check(blob[h["data_offset"]:] == a.tobytes(order="A"), f"npy {name}: data bytes")
for version in [(2, 0), (3, 0)]:
    f = path(f"v{version[0]}.npy")
    with open(f, "wb") as fh:
        np.lib.format.write_array(fh, arrays["f4"], version=version)
    h = dump("npy", f)
    check(h["version"] == version[0] and open(f, "rb").read()[h["data_offset"]:] == arrays["f4"].tobytes(), f"npy v{version[0]}")
for saver, method in [(np.savez, 0), (np.savez_compressed, 8)]:
    f = path(f"arrays_{method}.npz")
    saver(f, **{k: v for k, v in arrays.items() if k != "fortran"})
    z = dump("npz", f)
    blob = open(f, "rb").read()
    check(sorted(m["name"] for m in z["members"]) == sorted(k for k in arrays if k != "fortran"), f"npz {method}: names")
    for m in z["members"]:
        a = arrays[m["name"]]
        check(m["entry"]["method"] == method and m["header"]["shape"] == list(a.shape), f"npz {method} {m['name']}: {m}")
        if method == 0:
            check(blob[m["file_offset"]:m["file_offset"] + m["header"]["data_size"]] == a.tobytes(), f"npz {m['name']}: data bytes")
with zipfile.ZipFile(path("notes.npz"), "w") as zf:
    zf.writestr("a.npy", open(path("f4.npy"), "rb").read())
    zf.writestr("notes.txt", "hello")
refused("npz", path("notes.npz"), "member 'notes.txt' is not a .npy", "npz member not .npy")
with zipfile.ZipFile(path("fake.npz"), "w", zipfile.ZIP_DEFLATED) as zf:
    zf.writestr("a.npy", b"not an array at all")
refused("npz", path("fake.npz"), "member 'a.npy': npy: bad magic", "npz member with a .npy name but other content")
open(path("object.npy"), "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", 54) + b"{'descr': '|O', 'fortran_order': False, 'shape': (1,), }".ljust(53) + b"\n")
refused("npy", path("object.npy"), "unsupported dtype '|O'", "object dtype")


# --- safetensors, from a small writer of the format ----------------------------------------------
def safetensors(name, tensors, metadata=None, header_patch=None, lie=0, raw_header=None):
    header, blobs, at = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for tname, (dtype, shape, payload) in tensors.items():
        header[tname] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(payload)]}
        blobs.append(payload)
        at += len(payload)
    if header_patch:
        header_patch(header)
    text = raw_header if raw_header is not None else json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path(name), "wb") as fh:
        fh.write(struct.pack("<Q", len(text) + lie) + text + b"".join(blobs))
    return path(name)


st = {"w": ("F32", [2, 3], np.arange(6, dtype="<f4").tobytes()), "h": ("F16", [4], np.ones(4, "<f2").tobytes()),
      "bf": ("BF16", [2], b"\x80\x3f\x00\x40"), "e4": ("F8_E4M3", [3], b"\x38\x40\x48"), "e5": ("F8_E5M2", [1], b"\x3c"),
      "d": ("F64", [1], struct.pack("<d", 1.5)), "i64": ("I64", [1], struct.pack("<q", -1)), "i32": ("I32", [], struct.pack("<i", 3)),
      "i16": ("I16", [1], b"\x01\x00"), "i8": ("I8", [2], b"\xff\x01"), "u8": ("U8", [1], b"\x07"), "flag": ("BOOL", [1], b"\x01"),
      "none": ("F32", [0, 4], b"")}
f = safetensors("ok.safetensors", st, metadata={"format": "pt"})
got = dump("safetensors", f)
blob = open(f, "rb").read()
check([t["name"] for t in got["tensors"]] == list(st) and got["metadata"] == {"format": "pt"}, f"safetensors: {got}")
for t in got["tensors"]:
    dtype, shape, payload = st[t["name"]]
    check(t["dtype"] == dtype and t["shape"] == shape and blob[t["offset"]:t["offset"] + t["size"]] == payload, f"safetensors {t['name']}")

two = {"a": ("F32", [2], b"\0" * 8), "b": ("F32", [2], b"\0" * 8)}
refused("safetensors", safetensors("out.safetensors", two, header_patch=lambda h: h["b"].update(data_offsets=[8, 24])),
        "'b': data_offsets [8, 24] outside the 16 data bytes", "offsets beyond the buffer")
refused("safetensors", safetensors("overlap.safetensors", two, header_patch=lambda h: h["b"].update(data_offsets=[4, 12])),
        "overlaps", "overlapping tensors")
refused("safetensors", safetensors("shape.safetensors", two, header_patch=lambda h: h["b"].update(shape=[3])),
        "8 bytes for a shape and dtype of 12", "shape x dtype size != byte length")
refused("safetensors", safetensors("long.safetensors", two, lie=1000), "beyond the end of the file", "header length beyond the file")
refused("safetensors", safetensors("dup.safetensors", two, raw_header=b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                                                        b'"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}'),
        "duplicate key 'a'", "duplicate names")
refused("safetensors", safetensors("dtype.safetensors", two, header_patch=lambda h: h["a"].update(dtype="C128")),
        "unsupported dtype 'C128'", "unknown dtype")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("formats_check: all OK")
