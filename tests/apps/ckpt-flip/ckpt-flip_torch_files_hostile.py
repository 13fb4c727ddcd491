"""Crafted variants of the files PyTorch 2.11 wrote (tests/inject/formats/torch_files/torch-2.11.0-h200/)
through inspect, inject -o and inject --in-place: a zip whose directory lies (the error's offset is the
record at fault, inside the file), pickled storage sizes, shapes, strides and offsets that overflow,
safetensors fp8/fp4 tensors of shapes their bytes do not hold, truncations at every 61st byte, and DCP
directories whose .metadata names a file outside the directory or itself, or a data file shorter than
its chunks, or that are given by their .metadata. Each: the documented exit code, one error line
naming the file, the inputs byte-identical afterwards, no output or log left.
Usage: ckpt-flip_torch_files_hostile.py CKPT_FLIP TORCH_FILES_DIR TMP"""
import copy
import hashlib
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zipfile

flip, src, tmp = sys.argv[1:4]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def digest(path):
    """The bytes of a file, or of every file in a directory (by name)."""
    h = hashlib.sha256()
    paths = [os.path.join(path, n) for n in sorted(os.listdir(path))] if os.path.isdir(path) else [path]
    for p in paths:
        h.update(p.encode())
        with open(p, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


def run(args):
    return subprocess.run([flip] + args, capture_output=True, text=True, timeout=60)


def refused(name, path, code, pattern, offset_at=None, commands=("inspect", "inject", "in-place")):
    """Every command refuses `path` with `code` and one line matching `pattern`; nothing changes.
    offset_at: the offset the line must end with ("at offset N"), or True for any offset inside the file."""
    before = digest(path)
    out, log = os.path.join(tmp, "out.bin"), os.path.join(tmp, "flips.jsonl")
    runs = {"inspect": ["inspect", path],
            "inject": ["inject", path, "-o", out, "--log", log, "--flips", "3", "--seed", "1"],
            "in-place": ["inject", path, "--in-place", "--log", log, "--flips", "3", "--seed", "1"]}
    for cmd in commands:
        p = run(runs[cmd])
        lines = p.stderr.strip().splitlines()
        what = f"{name} ({cmd})"
        if p.returncode != code:
            fail(f"{what}: exit {p.returncode}, expected {code}: {p.stderr.strip()}")
            continue
        if len(lines) != 1 or not lines[0].startswith("ckpt-flip: error: ") or not re.search(pattern, lines[0]):
            fail(f"{what}: not one line matching {pattern!r}: {lines}")
            continue
        if offset_at is not None:
            m = re.search(r"at offset (\d+)$", lines[0])
            size = os.path.getsize(path)
            if not m:
                fail(f"{what}: no offset in {lines[0]!r}")
            elif offset_at is True and int(m.group(1)) >= size:
                fail(f"{what}: offset {m.group(1)} beyond the file's {size} bytes: {lines[0]!r}")
            elif offset_at is not True and int(m.group(1)) != offset_at:
                fail(f"{what}: offset {m.group(1)}, the record at fault is at {offset_at}: {lines[0]!r}")
        if digest(path) != before:
            fail(f"{what}: the input changed")
        for left in (out, log):
            if os.path.exists(left):
                fail(f"{what}: left {left}")
                os.remove(left)


def put(name, data):
    p = os.path.join(tmp, name)
    with open(p, "wb") as fh:
        fh.write(data)
    return p


# --- torch.save (zip) -------------------------------------------------------------------------
pt = open(os.path.join(src, "dtypes.pt"), "rb").read()
members = [(i.filename, zipfile.ZipFile(io.BytesIO(pt)).read(i.filename)) for i in zipfile.ZipFile(io.BytesIO(pt)).infolist()]


def central(data):
    """name -> offset of its central directory entry, and the zip64 end record's offset."""
    z64 = data.rfind(b"PK\x06\x06")
    count, _, at = struct.unpack("<QQQ", data[z64 + 32:z64 + 56])
    out = {}
    for _ in range(count):
        n, e, c = struct.unpack("<HHH", data[at + 28:at + 34])
        out[data[at + 46:at + 46 + n].decode()] = at
        at += 46 + n + e + c
    return out, z64


cd, z64 = central(pt)
assert z64 > 0, "torch.save 2.11 writes a zip64 end record"


def patched(off, fmt, value):
    b = bytearray(pt)
    struct.pack_into(fmt, b, off, value)
    return bytes(b)


d0, d1 = cd["dtypes/data/0"], cd["dtypes/data/1"]
local1 = struct.unpack("<I", pt[d1 + 42:d1 + 46])[0]
refused("central entry pointing at another entry's local header", put("cd_other.pt", patched(d0 + 42, "<I", local1)), 4,
        r"cd_other\.pt: zip: entry 'dtypes/data/0': local header names 'dtypes/data/1'", offset_at=local1)
refused("central entry pointing beyond the file", put("cd_beyond.pt", patched(d0 + 42, "<I", len(pt) + 100)), 4,
        r"local header offset \d+ beyond the end", offset_at=d0)
refused("stored entry whose sizes differ", put("cd_sizes.pt", patched(d0 + 20, "<I", 0x7FFFFFFF)), 4,
        r"entry 'dtypes/data/0': stored with compressed size != size", offset_at=d0)
refused("unknown compression method", put("cd_method.pt", patched(d0 + 10, "<H", 99)), 4, r"compression method 99", offset_at=d0)
dup = bytearray(pt)
dup[d1 + 46:d1 + 46 + len("dtypes/data/1")] = b"dtypes/data/0"
refused("two entries of one name", put("cd_dup.pt", bytes(dup)), 4, r"duplicate entry name 'dtypes/data/0'", offset_at=d1)
refused("zip64 record: entry counts of two disks", put("z64_disks.pt", patched(z64 + 32, "<Q", 3)), 4, r"multi-disk archive", offset_at=z64)
refused("zip64 record: more entries than the directory holds", put("z64_count.pt", patched(z64 + 40, "<Q", 46)), 4,
        r"claims \d+ entries in 46 bytes", offset_at=True)
refused("zip64 record: directory beyond the file", put("z64_cd.pt", patched(z64 + 48, "<Q", 2**64 - 1)), 4, r"lies outside the file")

# The pickle: the first tensor's persistent id ends in its storage's element count (BININT1 12),
# then storage offset, size (3, 4) and stride (4, 1).
pkl = dict(members)["dtypes/data.pkl"]
i = 111  # BININT1 12, TUPLE, BINPUT, BINPERSID, then the tensor's arguments
assert pkl[i:i + 3] == b"K\x0ct" and pkl[i + 6:i + 13] == b"K\x00K\x03K\x04\x86" and pkl[i + 15:i + 20] == b"K\x04K\x01\x86", "dtypes.pt's first tensor"


def long1(v):
    n = (v.bit_length() + 8) // 8
    return b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)


def with_pickle(p):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_STORED) as w:
        for n, data in members:
            w.writestr(n, p if n.endswith("data.pkl") else data)
    return b.getvalue()


numel, offset, size, stride = (i, i + 2), (i + 6, i + 8), (i + 8, i + 13), (i + 15, i + 20)


def swap(span, new):
    return with_pickle(pkl[:span[0]] + new + pkl[span[1]:])


refused("storage of 2^64 elements", put("numel.pt", swap(numel, long1(2**64))), 4, r"torch: 'float32': storage size is not an integer")
refused("storage of -12 elements", put("numel_neg.pt", swap(numel, long1(-12))), 4, r"negative storage size")
refused("size 2^32 x 2^32", put("size.pt", swap(size, long1(2**32) + long1(2**32) + b"\x86")), 4, r"'float32': reaches element \d+ of storage '0' of 12")
refused("stride 2^62", put("stride.pt", swap(stride, long1(2**62) + b"K\x01\x86")), 4, r"reaches element 9223372036854775811 of storage")
refused("stride -4", put("stride_neg.pt", swap(stride, long1(-4) + b"K\x01\x86")), 4, r"negative stride")
refused("storage offset 2^63 - 1", put("offset.pt", swap(offset, long1(2**63 - 1))), 4, r"reaches element 9223372036854775818 of storage")
j = pkl.index(b"float4_e2m1fn_x2q")  # the fp4 tensor: its (3, 4) shape, on a storage of 12 bytes
k = pkl.index(b"QK\x00K\x03K\x04\x86", j)
refused("float4_e2m1fn_x2 of shape (3, 5) on 12 bytes", put("f4.pt", with_pickle(pkl[:k + 3] + b"K\x03K\x05\x86" + pkl[k + 8:])), 4,
        r"'float4_e2m1fn_x2': reaches element 12 of storage '\d+' of 12")
for cut in list(range(0, len(pt), 61)) + [len(pt) - 1]:
    refused(f"dtypes.pt cut to {cut} bytes", put("cut.pt", pt[:cut]), 4, r"cut\.pt: ", commands=("inspect",))

# --- safetensors ------------------------------------------------------------------------------
st = open(os.path.join(src, "dtypes.safetensors"), "rb").read()
n = struct.unpack("<Q", st[:8])[0]
header, body = json.loads(st[8:8 + n]), st[8 + n:]


def safetensors(key, field, value):
    h = copy.deepcopy(header)
    h[key][field] = value
    text = json.dumps(h).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + body


for shape in ([3, 7], [1]):
    refused(f"F4 of shape {shape}", put("f4.safetensors", safetensors("float4_e2m1fn_x2", "shape", shape)), 4,
            r"tensor 'float4_e2m1fn_x2': \d+ bits of F4 elements do not fill whole bytes")
refused("F8_E4M3FNUZ of shape [3, 5] on 12 bytes", put("f8.safetensors", safetensors("float8_e4m3fnuz", "shape", [3, 5])), 4,
        r"tensor 'float8_e4m3fnuz': 12 bytes for a shape and dtype of 15")
refused("F8_E5M2FNUZ of shape [2^32, 2^32]", put("f8.safetensors", safetensors("float8_e5m2fnuz", "shape", [2**32, 2**32])), 4, r"shape overflows 64 bits")
refused("data_offsets [2^64 - 1, 11]", put("f8.safetensors", safetensors("float8_e4m3fnuz", "data_offsets", [2**64 - 1, 11])), 4, r"outside the \d+ data bytes")
refused("overlapping data_offsets", put("f8.safetensors", safetensors("float8_e4m3fnuz", "data_offsets", [530, 542])), 4, r"overlaps the tensor before it")
for cut in list(range(0, len(st), 61)) + [len(st) - 1]:
    refused(f"dtypes.safetensors cut to {cut} bytes", put("cut.safetensors", st[:cut]), 4, r"cut\.safetensors: ", commands=("inspect",))

# --- DCP directories ----------------------------------------------------------------------------
def dcp(kind, name, relpath=None):
    d = os.path.join(tmp, name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(os.path.join(src, kind), d)
    if relpath is not None:
        m = open(os.path.join(d, ".metadata"), "rb").read()
        old = b"\x8c\x0c__0_0.distcp"  # SHORT_BINUNICODE of _StorageInfo.relative_path
        assert old in m, kind
        new = relpath.encode()
        open(os.path.join(d, ".metadata"), "wb").write(m.replace(old, b"\x8c" + bytes([len(new)]) + new))
    return d


for kind in ("dcp_torch_save", "dcp_safetensors"):
    outside = os.path.join(tmp, "outside.distcp")
    shutil.copy(os.path.join(src, kind, "__0_0.distcp"), outside)
    for rel in ("../outside.distcp", outside):
        d = dcp(kind, kind + "_outside", rel)
        before = digest(outside)
        refused(f"{kind}: .metadata naming {rel}", d, 4, r"\.metadata: dcp metadata: data file '.*' is not a plain file name in the checkpoint's directory")
        if digest(outside) != before:
            fail(f"{kind}: the file outside the directory changed")
    refused(f"{kind}: .metadata naming itself as a data file", dcp(kind, kind + "_self", ".metadata"), 4,
            r"data file '\.metadata' is the checkpoint's metadata, not a data file")
    d = dcp(kind, kind + "_short")
    data = os.path.join(d, "__0_0.distcp")
    for cut in (0, 1, os.path.getsize(data) // 2, os.path.getsize(data) - 1):
        os.truncate(data, cut)
        refused(f"{kind}: __0_0.distcp cut to {cut} bytes", d, 4, r"__0_0\.distcp: ")
    d = dcp(kind, kind + "_meta")
    refused(f"{kind}: given by its .metadata", os.path.join(d, ".metadata"), 3,
            r"\.metadata: a torch\.distributed\.checkpoint is named by its directory: give .*_meta, not its \.metadata")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok: crafted PyTorch 2.11 files refused with one line, inputs unchanged")
