#!/usr/bin/python3
"""Hostile but valid HDF5 files for ckpt-flip's dataset model (tests/apps/ckpt-flip/ckpt-flip_hostile_datasets.sh).

Usage: hostile_files.py KIND OUT.h5 [EXTRA.h5]

Each KIND is one family of limits: dataspaces without elements, huge never-written datasets (a
file of a few KB), names that are not UTF-8, fault spaces beyond 64 bits, hard links, element
types and layouts ckpt-flip does not flip, virtual datasets and links into other files.
"""
import sys

import h5py
import numpy as np
from h5py import h5d, h5p, h5s, h5t


def empty(f):
    f.create_dataset("e", data=h5py.Empty("f4"))          # null dataspace: no element at all
    f.create_dataset("e64", data=h5py.Empty("<i8"))
    f.create_dataset("s", data=np.float32(1.5))            # scalar: one element
    f.create_dataset("z0", shape=(0,), dtype="f4")         # zero-sized dims
    f.create_dataset("z30", shape=(3, 0), dtype="f4")
    f.create_dataset("z0c", shape=(0, 5), dtype="f8", chunks=(4, 5), maxshape=(None, 5))
    f.create_dataset("w", data=np.arange(4, dtype="f4"))


def lazy(f):
    # 10^12 elements, never written: a file of a few KB whose logical size is 4 TB.
    f.create_dataset("big", shape=(10**12,), dtype="f4", chunks=(1024,))
    # The same with a few chunks written far apart (and a fill value of 2.5).
    d = f.create_dataset("sparse", shape=(10**6, 10**6), dtype="f4", chunks=(16, 64), fillvalue=2.5)
    d[0, 0:64] = np.arange(64, dtype="f4")
    d[500000:500016, 999936:1000000] = -1.0
    d[999999, 999999] = np.float32(3e38)
    # Contiguous and never written (HDF5 allocates contiguous storage late).
    f.create_dataset("contig", shape=(10**11,), dtype="f8")
    f.create_dataset("w", data=np.arange(4, dtype="f4"))


def lazy_b(f):
    """lazy() with one more element changed in 'sparse' and one in 'big' (diff must find exactly these)."""
    lazy(f)
    f["sparse"][500000, 999999] = 7.0   # in an allocated chunk
    f["sparse"][3, 500000] = 2.5        # a new chunk holding only the fill value: no difference
    f["big"][123456789] = 1.0           # a chunk allocated only in this file


def sparse_pair(f, dense_path):
    """A sparse dataset (few chunks allocated in a 66 MiB extent) in OUT, the same values fully
    written in EXTRA: scan and diff must report the same for both (the dense file is read in slabs)."""
    shape, chunks = (2112, 8192), (64, 128)
    rng = np.random.default_rng(7)
    blocks = [(0, 0), (64, 8064), (2048, 128), (1024, 1024)]
    with h5py.File(dense_path, "w") as g:
        for name, fill in (("a", 0.0), ("b", 2.5)):
            d = f.create_dataset(name, shape=shape, dtype="f4", chunks=chunks, fillvalue=fill)
            full = np.full(shape, fill, dtype="f4")
            for (r, c) in blocks:
                v = rng.normal(size=chunks).astype("f4")
                v[3, 5] = np.inf if name == "a" else np.float32(3e30)
                d[r:r + 64, c:c + 128] = v
                full[r:r + 64, c:c + 128] = v
            g.create_dataset(name, data=full, chunks=chunks)


def sparse_pair_b(f, dense_path):
    """sparse_pair() with a few elements changed, in an allocated chunk and in a new one."""
    sparse_pair(f, dense_path)
    with h5py.File(dense_path, "a") as g:
        for h in (f, g):
            h["a"][1, 2] = 9.0
            h["a"][2000, 4096] = -1.0
            h["b"][2111, 8191] = 2.5


def rechunked(f, dense_path, chunks=(64, 128), changed=False):
    """A sparse dataset with chunk shape `chunks` in OUT, the same values fully written in EXTRA."""
    shape = (2112, 8192)
    full = np.full(shape, 1.5, dtype="f4")
    full[10:20, 100:200] = np.arange(1000, dtype="f4").reshape(10, 100)
    if changed:
        full[15, 150] = -3.0
        full[2000, 8000] = 7.0
    d = f.create_dataset("a", shape=shape, dtype="f4", chunks=chunks, fillvalue=1.5)
    d[10:20, 100:200] = full[10:20, 100:200]
    if changed:
        d[2000, 8000] = 7.0
    with h5py.File(dense_path, "w") as g:
        g["a"] = full


def rechunked_b(f, dense_path):
    """rechunked() with another chunk shape and two elements changed."""
    rechunked(f, dense_path, chunks=(100, 300), changed=True)


def badname(f):
    f.create_dataset(b"w\xff", data=np.arange(4, dtype="f4"))
    g = f.create_group(b"g\xfe\\x")
    g.create_dataset(b"v\xc3", data=np.arange(6, dtype="f8").reshape(2, 3))
    f.create_dataset("ok", data=np.arange(3, dtype="f4"))


def overflow(f):
    # 2^62 f64 elements = 2^68 bits; three datasets of 2^63 bits each; a dataspace of 2^80 elements.
    f.create_dataset("wide", shape=(2**31, 2**31), dtype="f8", chunks=(1, 1024))
    for k in range(3):
        f.create_dataset("t%d" % k, shape=(2**58,), dtype="f4", chunks=(1024,))


def maxdim(f):
    # The largest extent ckpt-flip takes: 2^63-1 one-byte elements, chunks of one element.
    f.create_dataset("m", shape=(2**63 - 1,), dtype="i1", chunks=(1,))


def toomany(f):
    f.create_dataset("huge", shape=(2**40, 2**40), dtype="f4", chunks=(1, 1024))
    f.create_dataset("w", data=np.arange(4, dtype="f4"))


def hardlink(f):
    f["b"] = np.arange(8, dtype="f4")
    f["a"] = f["b"]                       # the same object under /a, /b and /g/c
    f.create_group("g")["c"] = f["b"]
    f["other"] = np.arange(2, dtype="f4")


def compact(fid, name, data):
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_layout(h5d.COMPACT)
    space = h5s.create_simple(data.shape)
    d = h5d.create(fid, name, h5t.py_create(data.dtype), space, dcpl=dcpl)
    d.write(h5s.ALL, h5s.ALL, data)


def types(f):
    f.create_dataset("compound", data=np.zeros(3, dtype=[("a", "f4"), ("b", "i8")]))
    f.create_dataset("string", data=np.array([b"abc", b"de"], dtype="S3"))
    f.create_dataset("vlen", data=["x", "yz"], dtype=h5py.string_dtype())
    f.create_dataset("vlen_f", shape=(2,), dtype=h5py.vlen_dtype("f4"))
    f.create_dataset("enum", data=np.array([0, 1, 1], dtype="u1"), dtype=h5py.enum_dtype({"a": 0, "b": 1}, basetype="u1"))
    f.create_dataset("opaque", data=np.void(b"\x01\x02\x03\x04"))
    f.create_dataset("array", shape=(2,), dtype=np.dtype(("f4", (3,))))
    f.create_dataset("ref", data=[f["compound"].ref], dtype=h5py.ref_dtype)
    f.create_dataset("bool", data=np.array([True, False]))
    # A bitfield (H5T_STD_B8LE) dataset.
    space = h5s.create_simple((4,))
    h5d.create(f.id, b"bitfield", h5t.STD_B8LE, space).write(h5s.ALL, h5s.ALL, np.arange(4, dtype="u1"))
    # Element sizes 1, 2, 8; f16; big-endian; chunk dims of 1; rank 32; a fill value set.
    f.create_dataset("i8", data=np.arange(-3, 3, dtype="i1"))
    f.create_dataset("u16", data=np.arange(5, dtype="u2"))
    f.create_dataset("u64", data=np.arange(5, dtype="u8"))
    f.create_dataset("f16", data=np.arange(5, dtype="f2"))
    f.create_dataset("f64be", data=np.arange(5, dtype=">f8"))
    f.create_dataset("chunk1", data=np.arange(12, dtype="f4").reshape(3, 4), chunks=(1, 1))
    f.create_dataset("rank32", data=np.arange(2, dtype="f4").reshape((2,) + (1,) * 31), chunks=(1,) * 32)
    d = f.create_dataset("fill", shape=(8,), dtype="f4", chunks=(2,), fillvalue=np.float32(-7.0))
    d[0:2] = 1.0
    compact(f.id, b"compact", np.arange(6, dtype="f4"))


def vds(f, src_path):
    with h5py.File(src_path, "w") as s:
        s["data"] = np.arange(16, dtype="f4")
    layout = h5py.VirtualLayout(shape=(16,), dtype="f4")
    layout[:] = h5py.VirtualSource(src_path, "data", shape=(16,))
    f.create_virtual_dataset("virt", layout, fillvalue=0)
    f["w"] = np.arange(4, dtype="f4")


def links(f, other_path):
    with h5py.File(other_path, "w") as s:
        s["data"] = np.arange(16, dtype="f4")
    f["w"] = np.arange(4, dtype="f4")
    f["soft"] = h5py.SoftLink("/w")
    f["dangling"] = h5py.SoftLink("/nowhere")
    f["ext"] = h5py.ExternalLink(other_path, "/data")
    f["ext_missing"] = h5py.ExternalLink(other_path + ".missing", "/data")


BUILDERS = {"empty": empty, "lazy": lazy, "lazy_b": lazy_b, "badname": badname, "overflow": overflow,
            "maxdim": maxdim, "toomany": toomany, "hardlink": hardlink, "types": types}
WITH_EXTRA = {"vds": vds, "links": links, "sparse_pair": sparse_pair, "sparse_pair_b": sparse_pair_b,
              "rechunked": rechunked, "rechunked_b": rechunked_b}


def main():
    kind, out = sys.argv[1], sys.argv[2]
    with h5py.File(out, "w") as f:
        if kind in WITH_EXTRA:
            WITH_EXTRA[kind](f, sys.argv[3])
        else:
            BUILDERS[kind](f)


if __name__ == "__main__":
    main()
