#!/usr/bin/python3
"""ckpt-flip on files a recent PyTorch wrote (tests/inject/formats/torch_files/torch-*/, made by
make_torch_files.py; manifest.json holds every tensor's dtype, shape, storage offset and bytes):
torch.save with the default pickle protocol and with protocol 5 (typed storages, and the dtypes that
have none, uint16/32/64, float8 and float4, saved as torch.storage.UntypedStorage + _rebuild_tensor_v3),
safetensors with every dtype it stores (F8_E4M3FNUZ, F8_E5M2FNUZ...), and torch.distributed.checkpoint
directories in both serialization modes. The torch 1.13 here cannot load these dtypes, so the
independent reader is this file's: zipfile for the archives, a non-executing unpickler (every class a
stub) for data.pkl and .metadata, the safetensors header by its spec. Per file:
 - the reader finds every manifest tensor with the manifest's dtype, shape and bytes;
 - `inspect --json` lists each (a torch.save storage under its first viewer's name, the other views as
   aliases) with the same dtype and shape; float4 is opaque (not flippable), everything else flippable;
 - `inject --ber 1` flips every selected bit: the log's first record of each element gives its word as
   ckpt-flip read it, which must be the manifest's, every flippable element is hit, and the written
   file holds each word complemented (opaque bytes, everything else but zip CRC-32s unchanged, CRCs
   valid); revert restores it byte for byte;
 - `inject --flips 40 --in-place`: each record's word is the manifest's (or the previous record's new
   word) with the logged bits changed, the file holds the last new word of each, nothing else moves;
   revert is byte-identical.
argv: ckpt-flip binary, scratch dir."""
import collections, glob, io, json, os, pickle, shutil, struct, zipfile

from ckpt_flip_pytest import FLIP, T, fail, flip, sha

HERE = os.path.dirname(os.path.abspath(__file__))
DIRS = sorted(glob.glob(os.path.join(HERE, "..", "..", "inject", "formats", "torch_files", "torch-*")))

# torch dtype -> (ckpt-flip's dtype name, bytes per element); None: opaque (listed, never flipped).
DTYPES = {"float64": ("f64", 8), "float32": ("f32", 4), "float16": ("f16", 2), "bfloat16": ("bf16", 2),
          "int64": ("i64", 8), "int32": ("i32", 4), "int16": ("i16", 2), "int8": ("i8", 1),
          "uint64": ("u64", 8), "uint32": ("u32", 4), "uint16": ("u16", 2), "uint8": ("u8", 1), "bool": ("bool", 1),
          "float8_e4m3fn": ("f8_e4m3", 1), "float8_e5m2": ("f8_e5m2", 1), "float8_e8m0fnu": ("f8_e8m0", 1),
          "float8_e4m3fnuz": ("f8_e4m3fnuz", 1), "float8_e5m2fnuz": ("f8_e5m2fnuz", 1), "float4_e2m1fn_x2": (None, 1)}
STORAGE_CLASSES = {"torch.DoubleStorage": "float64", "torch.FloatStorage": "float32", "torch.HalfStorage": "float16",
                   "torch.BFloat16Storage": "bfloat16", "torch.LongStorage": "int64", "torch.IntStorage": "int32",
                   "torch.ShortStorage": "int16", "torch.CharStorage": "int8", "torch.ByteStorage": "uint8",
                   "torch.BoolStorage": "bool", "torch.storage.UntypedStorage": "uint8"}
ST_TAGS = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
           "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool",
           "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu",
           "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz", "F4": "float4_e2m1fn_x2"}


# ---- the independent reader -------------------------------------------------------------------------

class Stub:
    """Any pickled class or callable: never imported or run; keeps its name, arguments and state."""
    name = "?"

    def __init__(self, *args, **kwargs):
        self.args, self.state = args, {}

    def __setstate__(self, state):
        self.__dict__.setdefault("state", {})
        if isinstance(state, tuple) and all(isinstance(s, dict) or s is None for s in state):  # (dict, slots)
            for s in state:
                self.state.update(s or {})
        elif isinstance(state, tuple):  # a class's own tuple (DCP's TensorProperties: dtype first)
            self.state["tuple"] = state
        else:
            self.state.update(state or {})

    def get(self, key, index):
        """A field from a dict state, or from position `index` of a tuple state."""
        return self.state[key] if key in self.state else self.state["tuple"][index]


class Tensor(dict):
    """A rebuilt tensor: its storage (the persistent id), offset, shape, stride and dtype."""


class NoExec(pickle.Unpickler):
    """Unpickles torch's data.pkl and DCP's .metadata without torch: names stay names."""

    def find_class(self, module, name):
        full = f"{module}.{name}"
        if full == "collections.OrderedDict":
            return collections.OrderedDict
        if full == "torch.Size":
            return tuple
        if full in ("torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor_v3"):
            v3 = full.endswith("v3")

            def rebuild(storage, offset, size, stride, requires_grad, hooks, *rest):
                return Tensor({"storage": storage, "offset": offset, "shape": list(size), "stride": list(stride),
                               "dtype": rest[0].split(".", 1)[1] if v3 else STORAGE_CLASSES[storage["type"]]})
            return rebuild
        if full.startswith("torch.") and name in DTYPES or full in STORAGE_CLASSES:
            return full  # a dtype or storage class, by name
        return type(name, (Stub,), {"name": full})

    def persistent_load(self, pid):
        kind, cls, key, location, numel = pid
        return {"type": cls, "key": key, "numel": numel}


def member_data_offset(buf, base, info):
    """Where a stored zip member's data starts in buf (its local header is at base + header_offset)."""
    at = base + info.header_offset
    if buf[at:at + 4] != b"PK\x03\x04":
        fail(f"no local header at {at}")
    n, m = struct.unpack("<HH", buf[at + 26:at + 30])
    return at + 30 + n + m


def read_torch_save(buf, base=0, length=None):
    """{name: {dtype, shape, offset (of the storage's data in buf), storage_offset, nbytes}} of a torch.save
    archive at buf[base:base + length]."""
    z = zipfile.ZipFile(io.BytesIO(buf[base:base + length] if length else buf[base:]))
    if z.testzip() is not None:
        fail("an archive member's CRC-32 does not match")
    pkl = [n for n in z.namelist() if n.endswith("/data.pkl")]
    state = NoExec(io.BytesIO(z.read(pkl[0]))).load()
    prefix = pkl[0][:-len("data.pkl")]
    out = {}
    for name, t in (state.items() if not isinstance(state, Tensor) else [("", state)]):
        info = z.getinfo(prefix + "data/" + t["storage"]["key"])
        if info.compress_type != zipfile.ZIP_STORED:
            fail(f"{name}: compressed storage")
        out[name] = {"dtype": t["dtype"], "shape": t["shape"], "storage_offset": t["offset"],
                     "data": member_data_offset(buf, base, info), "storage_bytes": info.file_size, "key": t["storage"]["key"]}
    return out


def read_safetensors(buf, base=0):
    n = struct.unpack("<Q", buf[base:base + 8])[0]
    header = json.loads(buf[base + 8:base + 8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        dtype, shape = ST_TAGS[e["dtype"]], list(e["shape"])
        if e["dtype"] == "F4":  # two E2M1 values per byte: torch's float4_e2m1fn_x2 halves the last dimension
            shape[-1] //= 2
        out[name] = {"dtype": dtype, "shape": shape, "storage_offset": 0, "data": base + 8 + n + b, "storage_bytes": end - b}
    return out, header


def read_dcp(d):
    """Every tensor of a DCP directory: .metadata's state_dict_metadata and storage_data, each chunk read
    from its file (a torch.save archive, or in the safetensors mode the blob's tensor named by its fqn)."""
    md = NoExec(open(os.path.join(d, ".metadata"), "rb")).load()
    where = {k.state["fqn"]: v.state for k, v in md.state["storage_data"].items()}
    out, files = {}, {}
    for fqn, tm in md.state["state_dict_metadata"].items():
        if tm.name.endswith("BytesStorageMetadata"):
            continue
        if len(tm.state["chunks"]) != 1:
            fail(f"{fqn}: one chunk expected (one process wrote it)")
        s = where[fqn]
        f = os.path.join(d, s["relative_path"])
        buf = files.setdefault(f, open(f, "rb").read())
        if buf[s["offset"]:s["offset"] + 4] == b"PK\x03\x04":
            (t,) = read_torch_save(buf, s["offset"], s["length"]).values()
        else:
            t = read_safetensors(buf, s["offset"])[0][fqn]
        want = tm.state["properties"].get("dtype", 0).split(".", 1)[1]
        if t["dtype"] != want or t["shape"] != list(tm.state["size"]):
            fail(f"{d}: {fqn}: chunk {t['dtype']} {t['shape']}, .metadata {want} {list(tm.state['size'])}")
        t["file"] = f
        out[fqn] = t
    return out


def layout(path):
    """{tensor: entry} with 'file' (the data file) for any of the formats here."""
    if os.path.isdir(path):
        return read_dcp(path)
    buf = open(path, "rb").read()
    got = read_torch_save(buf) if buf[:4] == b"PK\x03\x04" else read_safetensors(buf)[0]
    for t in got.values():
        t["file"] = path
    return got


def tensor_bytes(t, m):
    """The bytes of manifest tensor m as they lie in its file (entry t of the reader)."""
    size = DTYPES[m["dtype"]][1]
    n = len(m["hex"]) // 2
    at = t["data"] + t["storage_offset"] * size
    return open(t["file"], "rb").read()[at:at + n]


# ---- the checks ---------------------------------------------------------------------------------------

def check_reader(path, manifest):
    got = layout(path)
    for m in manifest["tensors"]:
        t = got.get(m["name"])
        if t is None or t["dtype"] != m["dtype"] or t["shape"] != m["shape"] or t["storage_offset"] != m["storage_offset"]:
            fail(f"{path}: {m['name']}: the reader finds {t}, the manifest says {m['dtype']} {m['shape']} at {m['storage_offset']}")
        if tensor_bytes(t, m).hex() != m["hex"]:
            fail(f"{path}: {m['name']}: bytes {tensor_bytes(t, m).hex()}, manifest {m['hex']}")
    return got


def datasets_of(path, manifest, got):
    """{dataset name in ckpt-flip: (manifest tensor, reader entry)}: each storage once, under the name of
    its first viewer in the manifest's (pickle) order; the other viewers: {alias: dataset}."""
    by_storage, names, aliases = {}, {}, {}
    for m in manifest["tensors"]:
        t = got[m["name"]]
        key = (t["file"], t["data"])
        if key in by_storage:
            aliases["/" + m["name"]] = by_storage[key]
            continue
        if t["storage_offset"] != 0:
            fail(f"{path}: {m['name']}: a first viewer at an offset is not in these files")
        by_storage[key] = "/" + m["name"]
        names["/" + m["name"]] = (m, t)
    return names, aliases


def check_inspect(path, names, aliases, st_f4):
    info = json.loads(flip("inspect", path, "--json").stdout)
    listed = {d["dataset"]: d for d in info["datasets"]}
    if set(listed) != set(names):
        fail(f"{path}: inspect lists {sorted(listed)}, the file holds {sorted(names)}")
    for name, (m, t) in names.items():
        d = listed[name]
        flip_name = DTYPES[m["dtype"]][0]
        shape = m["shape"]
        if flip_name is None:  # opaque: safetensors' F4 counts 4-bit elements, torch's float4_e2m1fn_x2 bytes
            want = ("F4 (opaque)", shape[:-1] + [shape[-1] * 2]) if st_f4 else ("F4_E2M1FN_X2 (opaque)", shape)
        else:
            want = (flip_name, shape)
        if (d["dtype"], d["shape"]) != want or d["flippable"] != (flip_name is not None):
            fail(f"{path}: inspect {name}: {d['dtype']} {d['shape']} flippable {d['flippable']}, want {want}")
        if d["logical_bytes"] != len(m["hex"]) // 2:
            fail(f"{path}: inspect {name}: {d['logical_bytes']} bytes, the manifest {len(m['hex']) // 2}")
    for alias, of in aliases.items():
        if alias not in listed[of].get("aliases", []):
            fail(f"{path}: {alias} is not listed as an alias of {of}: {listed[of].get('aliases')}")


def words(m):
    size = DTYPES[m["dtype"]][1]
    raw = bytes.fromhex(m["hex"])
    return [int.from_bytes(raw[i:i + size], "little") for i in range(0, len(raw), size)], size


def records(log):
    return [r for r in map(json.loads, open(log)) if r["type"] == "flip"]


def copy(src, dst):
    if os.path.isdir(src):
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)


def tree(path):
    """Every byte of the file or directory (for 'unchanged' checks)."""
    if os.path.isdir(path):
        return {f: open(os.path.join(path, f), "rb").read() for f in sorted(os.listdir(path))}
    return {"": open(path, "rb").read()}


def expect_words(path, before, out, names, final, what):
    """out's bytes are before's with each (dataset, index) word of `final` stored (the reader's offsets),
    up to the zip CRC-32 fields of the touched members (their validity: read_torch_save's testzip)."""
    want = {k: bytearray(v) for k, v in before.items()}
    for (ds, i), w in final.items():
        m, t = names[ds]
        size = DTYPES[m["dtype"]][1]
        key = os.path.basename(t["file"]) if os.path.isdir(path) else ""
        at = t["data"] + i * size
        want[key][at:at + size] = w.to_bytes(size, "little")
    got = tree(out)
    for k in want:
        diff = [i for i in range(len(want[k])) if want[k][i] != got[k][i]]
        if len(want[k]) != len(got[k]):
            fail(f"{what}: {k or path} changed size")
        # The only other bytes that may differ: a touched zip member's CRC-32 (local header and central
        # directory entry, 4 bytes each); layout(out) re-reads the archives and checks them.
        crc = crc_fields(path if not os.path.isdir(path) else os.path.join(path, k))
        if any(i not in crc for i in diff):
            fail(f"{what}: {k or path}: bytes {[i for i in diff if i not in crc][:8]} differ outside the flipped words")
    layout(out)  # every archive's CRC-32 valid again


def crc_fields(f):
    """File offsets of every CRC-32 field of every zip archive in file f (local headers, central entries)."""
    buf, out, at = open(f, "rb").read(), set(), 0
    if f.endswith(".safetensors"):
        return out
    for sig, off in ((b"PK\x03\x04", 14), (b"PK\x01\x02", 16), (b"PK\x07\x08", 4)):
        at = buf.find(sig)
        while at >= 0:
            out.update(range(at + off, at + off + 4))
            at = buf.find(sig, at + 1)
    return out


def exercise(path, manifest):
    what = os.path.relpath(path, os.path.dirname(os.path.dirname(path)))
    got = check_reader(path, manifest)
    names, aliases = datasets_of(path, manifest, got)
    check_inspect(path, names, aliases, path.endswith(".safetensors"))
    flippable = {n: v for n, v in names.items() if DTYPES[v[0]["dtype"]][0] is not None}
    original = tree(path)

    # Every selected bit once: the first record of each element shows the word ckpt-flip read.
    work = os.path.join(T, "ber-" + os.path.basename(path.rstrip("/")))
    log = work + ".jsonl"
    flip("inject", path, "-o", work, "--seed", "1", "--ber", "1", "--log", log)
    first, last = {}, {}
    for r in records(log):
        key = (r["dataset"], r["index"])
        m = names[r["dataset"]][0]
        if r["dtype"] != DTYPES[m["dtype"]][0]:
            fail(f"{what}: record {r['seq']}: dtype {r['dtype']} for {m['dtype']}")
        first.setdefault(key, int(r["old"], 16))
        if key in last and int(r["old"], 16) != last[key]:
            fail(f"{what}: record {r['seq']} does not chain")
        if int(r["new"], 16) != int(r["old"], 16) ^ int(r["mask"], 16):
            fail(f"{what}: record {r['seq']}: new is not old ^ mask")
        last[key] = int(r["new"], 16)
    for ds, (m, _) in flippable.items():
        ws, size = words(m)
        for i, w in enumerate(ws):
            if first.get((ds, i)) != w:
                fail(f"{what}: {ds}[{i}]: ckpt-flip read {first.get((ds, i))}, the manifest says {w}")
            if last[(ds, i)] != w ^ ((1 << 8 * size) - 1):
                fail(f"{what}: {ds}[{i}]: not every bit flipped ({last[(ds, i)]:#x} from {w:#x})")
    if set(first) - {(ds, i) for ds, (m, _) in flippable.items() for i in range(len(words(m)[0]))}:
        fail(f"{what}: records beyond the flippable tensors' elements")
    expect_words(path, original, work, names, last, f"{what} --ber 1")
    flip("revert", work, "--log", log)
    if tree(work) != original:
        fail(f"{what}: revert after --ber 1 is not byte-identical")

    # A few flips in place: each record's old word is the manifest's (or the record before's new).
    work = os.path.join(T, "flips-" + os.path.basename(path.rstrip("/")))
    copy(path, work)
    log = work + ".jsonl"
    flip("inject", work, "--in-place", "--seed", "7", "--flips", "40", "--log", log)
    current, final = {}, {}
    for r in records(log):
        key = (r["dataset"], r["index"])
        ws, _ = words(names[r["dataset"]][0])
        old = current.get(key, ws[r["index"]])
        if int(r["old"], 16) != old or int(r["new"], 16) != old ^ int(r["mask"], 16) or bin(int(r["mask"], 16)).count("1") != 1:
            fail(f"{what}: record {r['seq']} ({r['dataset']}[{r['index']}]): {r['old']} -> {r['new']}, the manifest's word is {old:#x}")
        current[key] = final[key] = int(r["new"], 16)
    if len(records(log)) != 40:
        fail(f"{what}: {len(records(log))} records for --flips 40")
    expect_words(path, original, work, names, final, f"{what} --flips 40")
    flip("revert", work, "--log", log)
    if tree(work) != original:
        fail(f"{what}: revert is not byte-identical")
    if tree(path) != original:
        fail(f"{what}: the input changed")
    print(f"{what}: {len(names)} tensors ({len(flippable)} flippable, {len(aliases)} aliases) ok")


if not DIRS:
    fail("no torch_files/torch-* directory")
for d in DIRS:
    manifest = json.load(open(os.path.join(d, "manifest.json")))
    for name, m in sorted(manifest["files"].items()):
        exercise(os.path.join(d, name), m)
print("ok")
