#!/usr/bin/env python3
"""Small real files written by this machine's PyTorch, for the format readers' tests.

  make_torch_files.py OUT_DIR

OUT_DIR (made; it must not exist or be empty) gets:
  dtypes.pt            torch.save with the default pickle protocol: one small tensor per dtype this
                       PyTorch has, and "float32_rows", a view into float32's storage at an offset
  dtypes_p5.pt         the same state dict with pickle_protocol=5
  dtypes.safetensors   safetensors.torch.save_file of the dtypes safetensors stores (safetensors package)
  dcp_torch_save/      torch.distributed.checkpoint directory in FileSystemWriter's torch.save format
                       (.metadata, __0_0.distcp): model tensors in float32, bfloat16 and float8, and
                       non-tensor optimizer values
  dcp_safetensors/     the same state with serialization_format=SerializationFormat.SAFETENSORS (each
                       data file: the pickled non-tensor values, then one safetensors blob); read back
                       with safetensors where DCP's FileSystemReader, which reads the torch.save format
                       only, cannot
  manifest.json        the versions that wrote them, what was written and what skipped, and per file
                       every tensor: name, dtype, shape, storage offset, raw little-endian bytes (hex)
DCP is saved by one process without a process group (no torchrun). Every file is read back with
PyTorch's (or safetensors') own loader and must give the manifest's bytes; where torch.load's
weights-only mode (the default since 2.6) refuses a file, the manifest's "note" says so. What this
PyTorch lacks is skipped with one line saying so (exit 77 without torch). Values are exact in every
dtype (multiples of 1/4 up to 7, and powers of two for float8_e8m0fnu, which has no sign and no
zero), so a reader can be checked bit for bit.
"""
import inspect, io, json, os, platform, re, sys, warnings

try:
    import torch
except ImportError as e:
    print(f"make_torch_files: no torch in {sys.executable}: {e}")
    sys.exit(77)

out = sys.argv[1] if len(sys.argv) == 2 else sys.exit(__doc__)
if os.path.isdir(out) and os.listdir(out):
    sys.exit(f"make_torch_files: {out} is not empty")
os.makedirs(out, exist_ok=True)
warnings.filterwarnings("ignore", message=".*(single process|process group|uninitialized).*")
skipped = []

def brief(e):
    """One line for an exception: its first line, and the restricted unpickler's complaint if any."""
    text = str(e).strip()
    m = re.search(r"WeightsUnpickler error:\s*(.+)", text)
    if m:
        return f"{type(e).__name__}: PyTorch's weights-only unpickler: {m.group(1).strip()}"
    return f"{type(e).__name__}: {text.splitlines()[0][:200] if text else ''}"

def skip(what, why):
    line = f"{what}: skipped: {why}"
    print(line)
    skipped.append(line)

VALUES = [0.0, 0.25, -0.5, 1.0, -1.5, 2.0, 3.5, -4.0, 7.0, -0.25, 0.75, 6.0]
POWERS = [2.0 ** k for k in range(-3, 9)]
INTS = list(range(-6, 6))

def make(dtype_name):
    """A 3x4 tensor of dtype_name with exact values, or None (and a skip line) if this PyTorch cannot."""
    dt = getattr(torch, dtype_name, None)
    if dt is None:
        skip(dtype_name, f"torch {torch.__version__} has no torch.{dtype_name}")
        return None
    try:
        if dtype_name == "bool":
            t = torch.tensor([i % 3 == 0 for i in range(12)])
        elif dtype_name.startswith("float4"):  # two 4-bit values per byte: only the packed bytes exist
            t = torch.arange(12, dtype=torch.uint8).view(dt)
        elif dt.is_floating_point:
            t = torch.tensor(POWERS if dtype_name == "float8_e8m0fnu" else VALUES, dtype=torch.float32).to(dt)
        elif dtype_name.startswith("uint"):
            t = torch.arange(12, dtype=torch.int64).to(dt)
        else:
            t = torch.tensor(INTS, dtype=torch.int64).to(dt)
        return t.reshape(3, 4)
    except Exception as e:  # e.g. no conversion from float32 to this dtype on the CPU
        skip(dtype_name, f"cannot make a {dtype_name} tensor: {brief(e)}")
        return None

def raw(t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()

def record(name, t):
    return {"name": name, "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
            "storage_offset": t.storage_offset(), "hex": raw(t).hex()}

def check(path, want, got):
    """Bytes read back by the library's own loader equal what was written."""
    for name, t in want.items():
        if name not in got or not torch.is_tensor(got[name]):
            sys.exit(f"make_torch_files: {path}: {name} not read back")
        if got[name].dtype != t.dtype or list(got[name].shape) != list(t.shape) or raw(got[name]) != raw(t):
            sys.exit(f"make_torch_files: {path}: {name} read back differs")

files = {}
DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool",
          "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
          "float8_e8m0fnu", "float4_e2m1fn_x2"]
tensors = {n: t for n, t in ((n, make(n)) for n in DTYPES) if t is not None}
state = dict(tensors)
state["float32_rows"] = tensors["float32"][1:]  # shares float32's storage, offset 4 elements

# ---- torch.save, default protocol and protocol 5
for name, kw in (("dtypes.pt", {}), ("dtypes_p5.pt", {"pickle_protocol": 5})):
    path = os.path.join(out, name)
    savable = dict(state)
    for n in list(savable):
        if n == "float32_rows":
            continue
        try:
            torch.save({n: savable[n]}, io.BytesIO(), **kw)
        except Exception as e:
            skip(f"{name} {n}", f"torch.save refuses it: {brief(e)}")
            del savable[n]
    torch.save(savable, path, **kw)
    note = None
    if "weights_only" in inspect.signature(torch.load).parameters:
        try:  # PyTorch's restricted unpickler, the default since 2.6
            torch.load(path, weights_only=True)
        except Exception as e:
            note = f"torch.load(weights_only=True) refuses it: {brief(e)}"
            print(f"{name}: {note}")
        check(path, savable, torch.load(path, weights_only=False))
    else:
        check(path, savable, torch.load(path))
    files[name] = {"writer": f"torch.save(state_dict, f{', pickle_protocol=5' if kw else ''})",
                   "tensors": [record(n, t) for n, t in savable.items()]}
    if note:
        files[name]["note"] = note
    print(f"{name}: {len(savable)} tensors")

# ---- safetensors
try:
    import safetensors
    import safetensors.torch as st
except ImportError:
    st = None
    skip("dtypes.safetensors", "no safetensors package")
if st is not None:
    ok = {}
    for n, t in tensors.items():
        try:
            st.save({n: t.contiguous()})
            ok[n] = t.contiguous()
        except Exception as e:
            skip(f"dtypes.safetensors {n}", f"safetensors {safetensors.__version__} refuses it: {brief(e)}")
    path = os.path.join(out, "dtypes.safetensors")
    st.save_file(ok, path, metadata={"format": "pt"})
    check(path, ok, st.load_file(path))
    files["dtypes.safetensors"] = {"writer": "safetensors.torch.save_file(tensors, f, metadata={'format': 'pt'})",
                                   "tensors": [record(n, t) for n, t in ok.items()]}
    print(f"dtypes.safetensors: {len(ok)} tensors")

# ---- torch.distributed.checkpoint, one process
try:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
except Exception as e:
    dcp = None
    skip("dcp_torch_save, dcp_safetensors", f"torch {torch.__version__} has no torch.distributed.checkpoint ({e})")

def dcp_state(with_bytes):
    model = {"w": tensors["float32"], "b": tensors["float32"][0].clone(), "w_bf16": tensors["bfloat16"]}
    for n in ("float8_e4m3fn", "float8_e5m2"):
        if n in tensors:
            model["w_" + n] = tensors[n]
    s = {"model": model}
    if with_bytes:
        s["optim"] = {"step": 7, "lr": 0.001, "kind": "adam"}
    return s

def flat(s, pre=""):
    for k, v in s.items():
        if isinstance(v, dict):
            yield from flat(v, pre + k + ".")
        else:
            yield pre + k, v

def dcp_save(state, path, writer_kw):
    writer = FileSystemWriter(path, **writer_kw)
    if hasattr(dcp, "save"):
        extra = {"no_dist": True} if "no_dist" in inspect.signature(dcp.save).parameters else {}
        dcp.save(state, storage_writer=writer, **extra)
    else:
        dcp.save_state_dict(state, storage_writer=writer, no_dist=True)

def dcp_load(state, path):
    reader = FileSystemReader(path)
    if hasattr(dcp, "load"):
        extra = {"no_dist": True} if "no_dist" in inspect.signature(dcp.load).parameters else {}
        dcp.load(state, storage_reader=reader, **extra)
    else:
        dcp.load_state_dict(state, storage_reader=reader, no_dist=True)

def dcp_blob_check(path, state):
    """Reads a safetensors-format DCP directory without DCP's reader: per data file, the pickled
    non-tensor values at their recorded offsets, then one safetensors blob after the last of them."""
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata
    md = FileSystemReader(path).read_metadata()
    ends, values, tensors = {}, {}, {}
    for idx, info in md.storage_data.items():
        ends.setdefault(info.relative_path, 0)
        if isinstance(md.state_dict_metadata[idx.fqn], BytesStorageMetadata):
            with open(os.path.join(path, info.relative_path), "rb") as f:
                f.seek(info.offset)
                values[idx.fqn] = torch.load(io.BytesIO(f.read(info.length)), weights_only=False)
            ends[info.relative_path] = max(ends[info.relative_path], info.offset + info.length)
    for rel, end in ends.items():
        with open(os.path.join(path, rel), "rb") as f:
            tensors.update(st.load(f.read()[end:]))
    check(path, dict(flat(state["model"], "model.")), tensors)
    if "optim" in state and values != dict(flat(state["optim"], "optim.")):
        sys.exit(f"make_torch_files: {path}: non-tensor values read back as {values}")

def dcp_mode(name, writer_kw, how, blob=False):
    path = os.path.join(out, name)
    def clear():
        for f in os.listdir(path) if os.path.isdir(path) else []:
            os.remove(os.path.join(path, f))
    state = dcp_state(True)
    try:
        dcp_save(state, path, writer_kw)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as e:  # DCP's CheckpointException is no Exception
        clear()
        state = dcp_state(False)
        try:
            dcp_save(state, path, writer_kw)
            skip(f"{name} non-tensor values", f"{brief(e)}; written with tensors only")
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as e2:
            clear()
            skip(name, brief(e2))
            return
    note = None
    try:
        back = {k: ({n: torch.empty_like(t) for n, t in v.items()} if k == "model" else dict.fromkeys(v))
                for k, v in state.items()}
        dcp_load(back, path)
        check(path, dict(flat(state["model"], "model.")), dict(flat(back["model"], "model.")))
        if "optim" in state and back["optim"] != state["optim"]:
            sys.exit(f"make_torch_files: {path}: non-tensor values read back as {back['optim']}")
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as e:
        if not blob:
            clear()
            skip(name, f"written, but DCP cannot load it: {brief(e)}")
            return
        note = f"dcp.load with FileSystemReader refuses it: {brief(e)}; read back with safetensors instead"
        print(f"{name}: {note}")
        dcp_blob_check(path, state)
    files[name] = {"writer": how, "files": sorted(os.listdir(path)), "optim": state.get("optim"),
                   "tensors": [record(n, t) for n, t in flat(state["model"], "model.")]}
    if note:
        files[name]["note"] = note
    print(f"{name}: {sorted(os.listdir(path))}")

if dcp is not None:
    dcp_mode("dcp_torch_save", {}, "torch.distributed.checkpoint.save(state, storage_writer=FileSystemWriter(dir))")
    params = inspect.signature(FileSystemWriter.__init__).parameters
    if "serialization_format" not in params:
        skip("dcp_safetensors", f"torch {torch.__version__}'s FileSystemWriter has no serialization_format")
    elif st is None:
        skip("dcp_safetensors", "no safetensors package")
    else:
        from torch.distributed.checkpoint.filesystem import SerializationFormat
        dcp_mode("dcp_safetensors", {"serialization_format": SerializationFormat.SAFETENSORS},
                 "torch.distributed.checkpoint.save(state, storage_writer=FileSystemWriter(dir, "
                 "serialization_format=SerializationFormat.SAFETENSORS))", blob=True)

versions = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "python": platform.python_version(),
            "numpy": __import__("numpy").__version__, "platform": platform.platform()}
if st is not None:
    versions["safetensors"] = safetensors.__version__
with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump({"versions": versions, "skipped": skipped, "files": files}, f, indent=1)
    f.write("\n")
print(f"make_torch_files: {len(files)} files in {out} with torch {torch.__version__}; {len(skipped)} skipped")
