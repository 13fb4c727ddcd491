#!/usr/bin/python3
"""ckpt-flip on torch.distributed.checkpoint (DCP) directories in the file-system writer's byte mode
(make_dcp_fixtures.py: `.metadata` pickled with PyTorch's class names and state, each chunk a whole
torch.save archive at its offset of `__R_0.distcp`; sharded and replicated tensors over 4 ranks)
and in its safetensors mode (each rank's file one safetensors blob of its chunks after the byte
values, DCP_SHARDING_INFO giving each chunk's offsets; read here from the safetensors spec, and
every byte but the tensors' data, header included, must stay as it was).
The tensors are the global ones: inspect's fault space is every stored chunk byte once; after
inject --flips N exactly N bits differ over the chunks as torch.load reads each chunk's archive,
every archive's CRC-32s stay valid (zipfile) and its pickle is unchanged; each log record names
its chunk, file, writing rank and the ranks that load it (every rank for a replicated tensor, the
chunk's rank for a sharded one); -o inside the input's directory is refused; revert restores every file byte for byte; replay, diff, scan and a
campaign work on the directory. Hostile directories (storage transforms, a missing data file,
offsets beyond a file, a path outside the directory, chunks overlapping or leaving a hole, a size
whose element count overflows, two chunks in the same bytes; in the
safetensors mode a blob tensor no chunk names, bytes past the blob, offsets disagreeing with
.metadata) are refused with one line and the documented exit code, nothing
written. argv: ckpt-flip binary, scratch dir."""
import io, json, os, shutil, subprocess, sys, zipfile

import numpy as np
import torch

from ckpt_flip_pytest import FLIP, T, fail, flip, read_safetensors, sha

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_dcp_fixtures as fx  # noqa: E402


def tree_sha(d):
    return {f: sha(os.path.join(d, f)) for f in sorted(os.listdir(d))}


def chunk_tensors(d, layout):
    """{(tensor, chunk index): (tensor, the bytes that must never change)}: in byte mode as torch.load
    reads each chunk's archive at its offset (the archive's other members); in safetensors mode as
    read_safetensors_chunk reads it (the whole file with every blob tensor's bytes blanked)."""
    out = {}
    for name, t in layout["tensors"].items():
        for i, c in enumerate(t["chunks"]):
            raw = open(os.path.join(d, c["file"]), "rb").read()[c["offset"]:c["offset"] + c["length"]]
            if not raw.startswith(b"PK\x03\x04"):
                out[(name, i)] = read_safetensors_chunk(os.path.join(d, c["file"]), c, name, t)
                continue
            z = zipfile.ZipFile(io.BytesIO(raw))
            if z.testzip() is not None:
                fail(f"{d}: the archive of {name} chunk {i} has a member whose CRC-32 does not match")
            out[(name, i)] = (torch.load(io.BytesIO(raw)), {n: z.read(n) for n in z.namelist() if not n.split("/")[-2:-1] == ["data"]})
    return out


ST_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def read_safetensors_chunk(path, c, name, t):
    """A chunk of DCP's safetensors serialization, read by the safetensors spec reader at the chunk's
    .metadata offset: the header entry named by its fqn, its offsets those DCP_SHARDING_INFO gives."""
    head, raws = read_safetensors(path, c["offset"])
    header = json.loads(head[8:])
    sharding = json.loads(header["__metadata__"]["DCP_SHARDING_INFO"])
    if sharding[name]["saved_offsets"] != c["offsets"]:
        fail(f"{name}: DCP_SHARDING_INFO says offsets {sharding[name]['saved_offsets']}, the chunk has {c['offsets']}")
    e = header[name]
    if e["shape"] != c["sizes"] or len(raws[name]) != c["length"] or ST_DTYPES[e["dtype"]] != getattr(torch, t["dtype"].split(".")[1]):
        fail(f"{name}: header entry {e} is not the chunk {c}")
    tensor = torch.frombuffer(bytearray(raws[name].tobytes()), dtype=ST_DTYPES[e["dtype"]]).reshape(e["shape"]).clone()
    blank, data = bytearray(open(path, "rb").read()), c["offset"] + len(head)
    for k, v in header.items():
        if k != "__metadata__":
            lo, hi = v["data_offsets"]
            blank[data + lo:data + hi] = bytes(hi - lo)
    return tensor, bytes(blank)


def bits(a, b):
    a = a.reshape(-1).contiguous().view(torch.uint8).numpy()
    b = b.reshape(-1).contiguous().view(torch.uint8).numpy()
    return int(np.unpackbits(a ^ b).sum())


def records(log):
    return [json.loads(l) for l in open(log) if json.loads(l).get("type") == "flip"]


def chunk_at(t, nd):
    for i, c in enumerate(t["chunks"]):
        if all(o <= x < o + s for x, o, s in zip(nd, c["offsets"], c["sizes"])):
            return i, c
    fail(f"index {nd} in no chunk")


def check_locations(log, layout):
    for r in records(log):
        t = layout["tensors"][r["dataset"][1:]]
        nd = r["nd"] if t["size"] else []
        i, c = chunk_at(t, nd)
        loc = r.get("location", {})
        want_loaders = list(range(layout["world"])) if t["placement"] == "replicated" else [c["rank"]]
        if (loc.get("chunk"), loc.get("file"), loc.get("offsets"), loc.get("writer_rank"), loc.get("placement"), loc.get("loaded_by")) != \
                (i, c["file"], c["offsets"], c["rank"], t["placement"], want_loaders):
            fail(f"{log}: record {r['seq']} of {r['dataset']} {nd}: location {loc}, want chunk {i} in {c['file']} "
                 f"by rank {c['rank']}, {t['placement']}, loaded by {want_loaders}")


def check_flipped(orig, out, layout, n):
    a, b = chunk_tensors(orig, layout), chunk_tensors(out, layout)
    total = 0
    for k in a:
        if a[k][1] != b[k][1]:
            fail(f"{out}: the archive of {k} changed outside its tensor's bytes (pickle or other members)")
        total += bits(a[k][0], b[k][0])
    if total != n:
        fail(f"{out}: {total} bits differ over the chunks (torch.load), expected {n}")


def exercise(mode):
    """inspect, inject (-o and in place), exact flips, locations, replay, revert, diff, scan and a
    campaign on a fixture directory written in `mode` (fixture variant ok or safetensors)."""
    d = f"{T}/ckpt-{mode}"
    layout = fx.write(d, mode)
    golden = tree_sha(d)
    stored_bits = sum(8 * torch.tensor([], dtype=getattr(torch, t["dtype"].split(".")[1])).element_size() * int(np.prod(c["sizes"]))
                      for t in layout["tensors"].values() for c in t["chunks"])

    info = json.loads(flip("inspect", d, "--json").stdout)
    if info["format"] != "dcp":
        fail(f"inspect: format {info['format']}")
    if {x["dataset"] for x in info["datasets"]} != {"/" + n for n in layout["tensors"]}:
        fail(f"inspect: datasets {[x['dataset'] for x in info['datasets']]}")
    if int(info["total_bits"]) != stored_bits:
        fail(f"inspect: total_bits {info['total_bits']}, the chunks hold {stored_bits}")
    for x in info["datasets"]:
        t = layout["tensors"][x["dataset"][1:]]
        if x["shape"] != t["size"] or x["role"] != ("optimizer" if x["dataset"].startswith("/optimizer") else "model"):
            fail(f"inspect: {x}")

    # -o: a new directory; exact flips by torch.load of every chunk; locations; replay; revert.
    flip("inject", d, "-o", f"{T}/{mode}-out", "--seed", "3", "--flips", "60", "--include", "*", "--log", f"{T}/{mode}-f.jsonl")
    check_flipped(d, f"{T}/{mode}-out", layout, 60)
    check_locations(f"{T}/{mode}-f.jsonl", layout)
    if tree_sha(d) != golden:
        fail("inject -o changed the input directory")
    # -o inside the input's directory would add a directory to the input: refused (exit 2), nothing written.
    for inside in (f"{d}/copy", f"{d}/./a/../copy"):
        p = subprocess.run([FLIP, "inject", d, "-o", inside, "--seed", "3", "--flips", "1", "--log", f"{T}/{mode}-in.jsonl"],
                           capture_output=True, text=True)
        if p.returncode != 2 or "inside the input's directory" not in p.stderr or len(p.stderr.strip().splitlines()) != 1:
            fail(f"inject -o {inside}: exit {p.returncode}, {p.stderr!r}")
    if tree_sha(d) != golden or sorted(os.listdir(d)) != sorted(os.listdir(f"{T}/{mode}-out")) or os.path.exists(f"{T}/{mode}-in.jsonl"):
        fail("a refused -o inside the input wrote something")
    if json.loads(open(f"{T}/{mode}-f.jsonl").readline())["file_format"] != "dcp":
        fail("the log's header does not say dcp")
    placements = {layout["tensors"][r["dataset"][1:]]["placement"] for r in records(f"{T}/{mode}-f.jsonl")}
    if placements != {"replicated", "sharded"}:
        fail(f"60 flips hit only {placements} tensors")
    flip("replay", d, "--log", f"{T}/{mode}-f.jsonl", "-o", f"{T}/{mode}-replayed")
    if tree_sha(f"{T}/{mode}-replayed") != tree_sha(f"{T}/{mode}-out"):
        fail("replay: not the injected output")
    flip("revert", f"{T}/{mode}-out", "--log", f"{T}/{mode}-f.jsonl")
    if tree_sha(f"{T}/{mode}-out") != golden:
        fail("revert: the directory is not byte-identical to the input")

    # In place on a copy, many flips; diff and scan read the global tensors; revert.
    shutil.copytree(d, f"{T}/{mode}-work")
    flip("inject", f"{T}/{mode}-work", "--in-place", "--seed", "8", "--flips", "500", "--log", f"{T}/{mode}-many.jsonl")
    check_flipped(d, f"{T}/{mode}-work", layout, 500)
    check_locations(f"{T}/{mode}-many.jsonl", layout)
    dj = json.loads(flip("diff", d, f"{T}/{mode}-work", "--json").stdout)["datasets"]
    for x in dj:
        t = layout["tensors"][x["dataset"][1:]]
        got = sum(1 for r in records(f"{T}/{mode}-many.jsonl") if r["dataset"] == x["dataset"])
        if int(x["differing"]) > got or (got and int(x["differing"]) == 0):
            fail(f"diff: {x['dataset']} {x['differing']} differing elements, {got} flips")
    # diff against torch: the global tensors diff reads are the chunks put together.
    sd = dict((n, t) for n, t, _ in fx.state_dict())
    a, b = chunk_tensors(d, layout), chunk_tensors(f"{T}/{mode}-work", layout)
    for name, t in layout["tensors"].items():
        whole = torch.zeros(t["size"], dtype=sd[name].dtype)
        for i, c in enumerate(t["chunks"]):
            sl = tuple(slice(o, o + s) for o, s in zip(c["offsets"], c["sizes"]))
            whole[sl] = a[(name, i)][0]
        if not torch.equal(whole, sd[name]):
            fail(f"{name}: the chunks put together are not the saved tensor")
    p = subprocess.run([FLIP, "scan", f"{T}/{mode}-work", "--json"], capture_output=True, text=True)
    if p.returncode not in (0, 10):
        fail(f"scan: exit {p.returncode}: {p.stderr}")
    flip("revert", f"{T}/{mode}-work", "--log", f"{T}/{mode}-many.jsonl")
    if tree_sha(f"{T}/{mode}-work") != golden:
        fail("revert in place: not byte-identical")

    # A campaign over the directory: each trial's flips name their chunk; the golden stays as it was.
    json.dump({"checkpoint": d, "command": "echo '{\"test_accuracy\": 0.5}' > {out}", "timeout_s": 60, "trials": 4, "seed": 2,
               "inject": {"flips": 2, "role": "all"}}, open(f"{T}/{mode}-c.json", "w"))
    flip("campaign", f"{T}/{mode}-c.json", "--out", f"{T}/{mode}-camp", "-q")
    trials = [json.loads(l) for f in sorted(os.listdir(f"{T}/{mode}-camp/results")) for l in open(f"{T}/{mode}-camp/results/{f}")]
    trials = [r for r in trials if "flips" in r]
    if len(trials) != 4 or any("chunk" not in fl.get("location", {}) for r in trials for fl in r["flips"]):
        fail(f"campaign: {trials}")
    if tree_sha(d) != golden:
        fail("the campaign changed the golden directory")




exercise("ok")
exercise("safetensors")

# Hostile directories.
def refused(variant, rc, words):
    h = f"{T}/bad-{variant}"
    fx.write(h, variant)
    before = tree_sha(h)
    for args in (["inspect", h], ["inject", h, "-o", f"{T}/never", "--seed", "1", "--flips", "1", "--log", f"{T}/never.jsonl"],
                 ["inject", h, "--in-place", "--seed", "1", "--flips", "1", "--log", f"{T}/never.jsonl"]):
        p = subprocess.run([FLIP, *args], capture_output=True, text=True)
        lines = p.stderr.strip().splitlines()
        if p.returncode != rc or len(lines) != 1 or any(w not in lines[0] for w in words):
            fail(f"{variant}: {' '.join(args)}: exit {p.returncode} (want {rc}), want one line naming {words}: {p.stderr!r}")
        for path in (f"{T}/never", f"{T}/never.jsonl"):
            if os.path.exists(path):
                fail(f"{variant}: a refused run left {path}")
    if tree_sha(h) != before:
        fail(f"{variant}: a refused run changed the input")


refused("transform", 2, ["__0_0.distcp", "transforms", "stream_zstd"])
refused("missing_file", 3, ["__9_0.distcp", ".metadata"])
refused("beyond", 4, ["__1_0.distcp", "beyond the end"])
refused("dotdot", 4, [".metadata", "not a plain file name"])
refused("overlap", 4, [".metadata", "overlap"])
refused("hole", 4, [".metadata", "of its 60 elements"])
# A global size whose element count wraps 64 bits to exactly what the chunks hold (scan never ended on
# it), and two chunks stored in the same bytes (each word counted twice; the log could not be undone).
refused("size_wrap", 4, [".metadata", "model.embed.weight", "overflows 64 bits"])
refused("aliased", 4, ["__0_0.distcp", "chunks must not share bytes"])
# The safetensors serialization: rank 1's blob naming a tensor .metadata places in no chunk, a
# tensor's bytes running past the blob, a chunk's saved_offsets not its .metadata offsets.
refused("st_ghost", 4, ["__1_0.distcp", "DCP_SHARDING_INFO names model.ghost"])
refused("st_outside", 4, ["__1_0.distcp", "safetensors"])
refused("st_offsets", 4, ["__1_0.distcp", "saved_offsets"])
print("ok")
