#!/usr/bin/python3
"""Writes torch.distributed.checkpoint (DCP) directories as PyTorch's file-system writer lays them
out, without torch.distributed.checkpoint (torch 1.13 has none): `.metadata` is the pickle of a
`Metadata` built from classes of the same modules, names and pickled state as PyTorch's
(torch/distributed/checkpoint/metadata.py and filesystem.py: dataclasses pickled by their __dict__,
TensorProperties by its 5-tuple __getstate__, _StorageInfo without its None fields), and each rank's
data file `__R_0.distcp` holds, for each item the rank writes, its bytes at the recorded offset: a
non-tensor value's torch.save bytes first, then each tensor chunk as a whole torch.save archive of
the chunk (the writer's byte serialization mode), or, in variant `safetensors`, one safetensors blob
of the rank's chunks (the writer's safetensors serialization mode, see safetensors_blob). A tensor every rank holds whole is replicated and
written once, by the rank with the fewest bytes so far (the save planner's deduplication); a
sharded tensor is split along dimension 0, each rank writing its own chunk.

Usage: make_dcp_fixtures.py OUT_DIR [VARIANT]   VARIANT: ok (default), transform, missing_file,
beyond, dotdot, overlap, hole, size_wrap (a global size whose element count wraps 64 bits to what the
chunks hold), aliased (two chunks stored in the same bytes), safetensors; st_ghost, st_outside, st_offsets
(safetensors mode, rank 1's blob: a tensor .metadata does not name, bytes past the blob, saved_offsets
not the chunk's). Prints the layout as JSON on stdout:
{tensor: {"dtype", "size", "chunks": [{"offsets", "sizes", "file", "offset", "length", "rank"}],
"placement"}} and the world size."""
import dataclasses
import enum
import io
import json
import os
import pickle
import struct
import sys
import types

import torch


def _module(name):
    m = types.ModuleType(name)
    sys.modules[name] = m
    return m


_MD = _module("torch.distributed.checkpoint.metadata")
_FS = _module("torch.distributed.checkpoint.filesystem")


def _place(cls, mod):
    cls.__module__ = mod.__name__
    cls.__qualname__ = cls.__name__
    setattr(mod, cls.__name__, cls)
    return cls


@dataclasses.dataclass
class ChunkStorageMetadata:
    offsets: torch.Size
    sizes: torch.Size


class _MEM_FORMAT_ENCODING(enum.Enum):
    TORCH_CONTIGUOUS_FORMAT = 0
    TORCH_CHANNELS_LAST = 1
    TORCH_PRESERVE_FORMAT = 2


@dataclasses.dataclass
class TensorProperties:
    dtype: torch.dtype = torch.float32
    layout: torch.layout = torch.strided
    requires_grad: bool = False
    memory_format: object = None
    pin_memory: bool = False

    def __getstate__(self):
        return (self.dtype, self.layout, self.requires_grad, _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT, self.pin_memory)


@dataclasses.dataclass
class TensorStorageMetadata:
    properties: TensorProperties
    size: torch.Size
    chunks: list


@dataclasses.dataclass
class BytesStorageMetadata:
    pass


@dataclasses.dataclass
class StorageMeta:
    checkpoint_id: object = None
    save_id: object = None
    load_id: object = None
    modules: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Metadata:
    state_dict_metadata: dict
    planner_data: object = None
    storage_data: object = None
    storage_meta: object = None
    version: object = None


@dataclasses.dataclass(frozen=True)
class MetadataIndex:
    fqn: str
    offset: object = None
    index: object = dataclasses.field(hash=False, compare=False, default=None)


@dataclasses.dataclass
class _StorageInfo:
    relative_path: str
    offset: int
    length: int
    transform_descriptors: object = None

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if v is not None}


for _c in (ChunkStorageMetadata, _MEM_FORMAT_ENCODING, TensorProperties, TensorStorageMetadata, BytesStorageMetadata,
           StorageMeta, Metadata, MetadataIndex):
    _place(_c, _MD)
_place(_StorageInfo, _FS)

WORLD = 4


def state_dict():
    """The checkpoint's tensors: (name, tensor, placement). Replicated ones are whole on every rank
    (data parallel); sharded ones are split along dimension 0 over the ranks (FSDP, tensor parallel)."""
    g = torch.Generator().manual_seed(5)
    return [
        ("model.embed.weight", torch.randn(16, 8, generator=g), "sharded"),
        ("model.layers.0.w", torch.randn(10, 6, generator=g), "sharded"),  # uneven: 3, 3, 3, 1 rows
        ("model.norm.weight", torch.randn(8, generator=g).to(torch.bfloat16), "replicated"),
        ("model.head.bias", torch.randn(5, generator=g).half(), "replicated"),
        ("optimizer.state.model.embed.weight.exp_avg", torch.randn(16, 8, generator=g), "sharded"),
        ("optimizer.state.model.layers.0.w.step", torch.tensor(7.0), "replicated"),
    ]


def shards(n, world):
    """Row ranges of n rows over `world` ranks, ceil-divided (as DTensor's Shard(0))."""
    per = -(-n // world)
    return [(min(r * per, n), min((r + 1) * per, n)) for r in range(world)]


# The safetensors serialization mode (FileSystemWriter(serialization_format=SAFETENSORS)): after the
# byte values, a rank's file is one safetensors blob of its tensor chunks, each under its fqn, its
# `__metadata__` holding DCP_SHARDING_INFO = json {fqn: {"saved_offsets": chunk offsets}}; every
# chunk's _StorageInfo has the blob's start as offset and the chunk's byte count as length.
SAFETENSORS_VARIANTS = ("safetensors", "st_ghost", "st_outside", "st_offsets")
_ST_DTYPE = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64"}


def safetensors_blob(items, variant="safetensors"):
    """items: [(fqn, offsets, chunk tensor)]. Data ordered by element size (largest first), then
    name, as safetensors' writer orders it; the header padded with spaces to 8 bytes."""
    order = sorted(items, key=lambda x: (-x[2].element_size(), x[0]))
    header, sharding, data = {}, {}, b""
    for name, off, c in order:
        raw = c.reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": _ST_DTYPE[c.dtype], "shape": list(c.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        sharding[name] = {"saved_offsets": list(off)}
        data += raw
    if variant == "st_ghost":  # a tensor no .metadata chunk names
        header["model.ghost"] = {"dtype": "F32", "shape": [2], "data_offsets": [len(data), len(data) + 8]}
        sharding["model.ghost"] = {"saved_offsets": [0]}
        data += bytes(8)
    if variant == "st_outside":  # the last tensor's bytes run past the blob
        last = max(header.values(), key=lambda h: h["data_offsets"][1])
        last["data_offsets"][1] += 64
    if variant == "st_offsets":  # a chunk's saved_offsets not the ones .metadata gives
        name = order[0][0]
        sharding[name]["saved_offsets"] = [x + 1 for x in sharding[name]["saved_offsets"]]
    header["__metadata__"] = {"DCP_SHARDING_INFO": json.dumps(sharding), "DCP_VERSION": "1.0", "format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def write(out, variant="ok", tensors=None):
    """tensors: [(name, tensor, placement)], default state_dict()."""
    os.makedirs(out, exist_ok=True)
    items = {r: [] for r in range(WORLD)}  # rank -> [(fqn, offsets, tensor | bytes)]
    load = [0] * WORLD
    layout, sdm, planner = {}, {}, {}
    for name, t, placement in (state_dict() if tensors is None else tensors):
        chunks = []
        if placement == "replicated":
            r = min(range(WORLD), key=lambda k: load[k])  # the deduplication's choice: the least loaded rank
            load[r] += t.numel() * t.element_size()
            chunks.append((r, [0] * t.dim(), list(t.shape), t))
        else:
            for r, (a, b) in enumerate(shards(t.shape[0], WORLD)):
                if b > a:
                    chunks.append((r, [a] + [0] * (t.dim() - 1), [b - a] + list(t.shape[1:]), t[a:b].clone()))
        if variant == "overlap" and name == "model.layers.0.w":
            r, off, sz, c = chunks[1]
            chunks[1] = (r, [off[0] - 1] + off[1:], sz, t[off[0] - 1:off[0] - 1 + sz[0]].clone())
        if variant == "hole" and name == "model.layers.0.w":
            chunks.pop()
        layout[name] = {"dtype": str(t.dtype), "size": list(t.shape), "placement": placement, "chunks": []}
        md_chunks = []
        for r, off, sz, c in chunks:
            items[r].append((name, off, c))
            md_chunks.append(ChunkStorageMetadata(offsets=torch.Size(off), sizes=torch.Size(sz)))
            layout[name]["chunks"].append({"offsets": off, "sizes": sz, "rank": r})
        sdm[name] = TensorStorageMetadata(properties=TensorProperties(dtype=t.dtype), size=torch.Size(t.shape), chunks=md_chunks)
        planner[name] = tuple(name.split("."))
    # A non-tensor value, written as bytes by rank 0 (BytesStorageMetadata).
    sdm["optimizer.param_groups.0.lr"] = BytesStorageMetadata()
    planner["optimizer.param_groups.0.lr"] = ("optimizer", "param_groups", "0", "lr")
    lr = io.BytesIO()
    torch.save(0.001, lr)

    storage = {}
    for r in range(WORLD):
        fname = f"__{r}_0.distcp"
        with open(os.path.join(out, fname), "wb") as f:
            if r == 0:
                at = f.tell()
                f.write(lr.getvalue())
                storage[MetadataIndex("optimizer.param_groups.0.lr")] = _StorageInfo(fname, at, f.tell() - at)
            if variant in SAFETENSORS_VARIANTS:
                blob_at = f.tell()
                f.write(safetensors_blob(items[r], variant if r == 1 else "safetensors"))
            for name, off, c in items[r]:
                if variant in SAFETENSORS_VARIANTS:
                    info = _StorageInfo(fname, blob_at, c.numel() * c.element_size())
                else:
                    at = f.tell()
                    torch.save(c, f)
                    info = _StorageInfo(fname, at, f.tell() - at)
                if variant == "transform" and name == "model.embed.weight":
                    info.transform_descriptors = ["stream_zstd"]
                storage[MetadataIndex(name, torch.Size(off))] = info
                for ch in layout[name]["chunks"]:
                    if ch["offsets"] == off:
                        ch.update(file=fname, offset=info.offset, length=info.length)
    victim = MetadataIndex("model.layers.0.w", torch.Size([3, 0]))
    if variant == "missing_file":
        storage[victim].relative_path = "__9_0.distcp"
    if variant == "beyond":
        storage[victim].offset += 1 << 20
    if variant == "dotdot":
        storage[victim].relative_path = "../__1_0.distcp"
    if variant == "size_wrap":  # 16 x 8 stored; (2^61 + 16) x 8 = 2^64 + 128 elements, 128 in 64 bits
        sdm["model.embed.weight"].size = torch.Size([(1 << 61) + 16, 8])
    if variant == "aliased":  # chunk 1 of the victim stored in chunk 0's archive
        c0, c1 = layout["model.layers.0.w"]["chunks"][:2]
        storage[MetadataIndex("model.layers.0.w", torch.Size(c1["offsets"]))] = _StorageInfo(c0["file"], c0["offset"], c0["length"])
    md = Metadata(state_dict_metadata=sdm, planner_data=planner, storage_data=storage,
                  storage_meta=StorageMeta(checkpoint_id=out, save_id="fixture"), version="1.0.0")
    with open(os.path.join(out, ".metadata"), "wb") as f:
        pickle.dump(md, f)
    return {"world": WORLD, "tensors": layout}


if __name__ == "__main__":
    print(json.dumps(write(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "ok")))
