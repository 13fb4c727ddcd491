#!/usr/bin/python3
"""Writes the hostile inputs that once cost resil quadratic time, gigabytes or a wrong answer into
the fuzz corpora, so every inject_fuzz run replays them and mutates from them:

  pickle/views_nested, zip/views_nested   128 x 128 views of one storage through a memoised list
                                          (names and alias lists built per view; the 1023 x 1024 of
                                          ckpt-flip_shared_views takes 10 s per run under the fuzzers'
                                          sanitizers, past their 5 s timeout)
  zip/views_list                          a list of 10,000 references to one tensor
  zip/zip64_record_in_tensor              a zip64 end record inside a tensor's bytes, the locator
                                          pointing at it
  zip/hdf5_signature_in_tensor            a .pt whose tensor bytes hold the HDF5 signature at 1024
  zip/huge_storage                        a few hundred bytes whose pickle declares a 2^40-element
                                          storage
  npy/huge_shape                          a .npy header declaring 2^40 elements over 8 bytes of data
  safetensors/not_utf8                    a header key that is not UTF-8
  log/tp_global_beyond_2_64               a tp shard's record whose global N-d index lies beyond flat
                                          index 2^64 - 1 (the parser's 128-bit check), beside a valid one

Usage: /usr/bin/python3 make_hostile_seeds.py [CORPUS_DIR]   (default: corpus/ beside this script)
Needs torch (Debian's python3-torch); the files are committed, so the fuzz test does not.
"""
import io
import os
import struct
import sys
import zipfile

import torch

corpus = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(kind, name, data):
    os.makedirs(os.path.join(corpus, kind), exist_ok=True)
    with open(os.path.join(corpus, kind, name), "wb") as f:
        f.write(data)


def saved(obj):
    b = io.BytesIO()
    torch.save(obj, b)
    return b.getvalue()


def pickle_of(pt):
    z = zipfile.ZipFile(io.BytesIO(pt))
    return z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))


t = torch.arange(4, dtype=torch.float32)
nested = saved([[t] * 128] * 128)
write("pickle", "views_nested", pickle_of(nested))
write("zip", "views_nested", nested)
write("zip", "views_list", saved([t] * 10_000))

# The zip64 end record copied into a tensor's bytes and the locator pointing at the copy.
base = saved({"model": {"w": torch.zeros(64)}})
loc = base.rfind(b"PK\x05\x06") - 20
off = struct.unpack_from("<Q", base, loc + 8)[0]
record = base[off:off + 56]
holder = bytearray(saved({"model": {"w": torch.frombuffer(bytearray(record + bytes(200)), dtype=torch.float32).clone()}}))
info = zipfile.ZipFile(io.BytesIO(bytes(holder))).getinfo("archive/data/0")
data = info.header_offset + 30 + sum(struct.unpack_from("<HH", holder, info.header_offset + 26))
loc = holder.rfind(b"PK\x05\x06") - 20
struct.pack_into("<Q", holder, loc + 8, data)
write("zip", "zip64_record_in_tensor", bytes(holder))

# The HDF5 signature at offset 1024 of the file, inside a tensor's bytes.
sig = b"\x89HDF\r\n\x1a\n"
for pad in range(0, 2048, 4):
    raw = bytearray(2048)
    pt = saved({"w": torch.frombuffer(raw, dtype=torch.uint8).clone()})
    info = zipfile.ZipFile(io.BytesIO(pt)).getinfo("archive/data/0")
    start = info.header_offset + 30 + sum(struct.unpack_from("<HH", pt, info.header_offset + 26))
    if start <= 1024 < start + 2048 - 8:
        raw[1024 - start:1024 - start + 8] = sig
        write("zip", "hdf5_signature_in_tensor", saved({"w": torch.frombuffer(raw, dtype=torch.uint8).clone()}))
        break

# A storage that declares 2^40 elements: the element count in the pickle's persistent id, bytes unchanged.
small = saved({"w": torch.zeros(3)})
pkl = pickle_of(small)
huge = pkl.replace(b"K\x03\x85", b"\x8a\x06\x00\x00\x00\x00\x00\x01\x85", 1) if b"K\x03\x85" in pkl else pkl
z_in = zipfile.ZipFile(io.BytesIO(small))
out = io.BytesIO()
with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z_out:
    for n in z_in.namelist():
        z_out.writestr(n, huge if n.endswith("/data.pkl") else z_in.read(n))
write("zip", "huge_storage", out.getvalue())

# A .npy header declaring 2^40 float32 elements over 8 bytes of data.
header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }"
header += b" " * (-(10 + len(header) + 1) % 64) + b"\n"
write("npy", "huge_shape", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + bytes(8))

bad = b'{"w\xff\xfe": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'
bad += b" " * (-len(bad) % 8)
write("safetensors", "not_utf8", struct.pack("<Q", len(bad)) + bad + bytes(8))
# A flip log whose second record names a global element beyond flat index 2^64 - 1.
rec = ('{"anchor":3,"bits":[3],"dataset":"/model/h.0.mlp.c_fc.weight","dtype":"f32",'
       '"global_index":%d,"global_nd":%s,"global_shape":%s,"index":%d,"mask":"0x00000008","nd":[%d,1],'
       '"new":"0x3f800008","old":"0x3f800000","seq":%d,"type":"flip"}')
big = 2**64 - 1
write("log", "tp_global_beyond_2_64", "\n".join([
    '{"type":"header","format":"resil-flip-log/1","seed":1,"planned":2}',
    rec % (4161, "[65,1]", "[128,64]", 65, 1, 0),
    rec % (0, "[%d,%d]" % (big, big - 1), "[%d,%d]" % (big, big), 66, 1, 1),
    '{"type":"footer","applied":2}', ""]).encode())
print("seeds written to", corpus)
