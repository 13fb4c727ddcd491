#!/usr/bin/python3
"""ckpt-flip on Hugging Face sharded checkpoints: an index (model.safetensors.index.json,
pytorch_model.bin.index.json) whose weight_map names each tensor's shard, a directory holding one,
and a directory of *.safetensors files without an index. One fault space over all the shards:
inspect's total is every data bit of every shard, inject --flips N changes exactly N bits across the
files (safetensors read by a reader written here from the format's description, .bin shards by
torch.load), a draw of many flips lands in each shard in proportion to its bytes, each log record
names the shard that holds the word, revert restores every file byte for byte, replay rebuilds the
same output, diff and scan read the set, a campaign runs on it and leaves it as it was. Hostile
sets (an index naming ../ or a path, a link to another user's file, a missing shard, a tensor named
twice or in two shards, two indexes in one directory) are refused with one line naming the file
and the documented exit code, and nothing is written. argv: ckpt-flip binary, scratch dir."""
import json, os, shutil, struct, subprocess, sys, zipfile

import numpy as np
import torch

from ckpt_flip_pytest import FLIP, T, bits, fail, flip, read_safetensors, sha, write_safetensors

rng = np.random.default_rng(23)


def tree_sha(d):
    return {f: sha(os.path.join(d, f)) for f in sorted(os.listdir(d)) if os.path.isfile(os.path.join(d, f))}


def f32(*shape):
    return ("F32", shape, rng.standard_normal(shape).astype("<f4").tobytes())


def bf16(*shape):
    return ("BF16", shape, (rng.standard_normal(shape).astype("<f4").view("<u4") >> 16).astype("<u2").tobytes())


def log_records(path):
    return [json.loads(l) for l in open(path) if json.loads(l).get("type") == "flip"]


# --- A safetensors set: three shards of 1 : 2 : 5 bytes (about), an index naming them.
hf = f"{T}/hf"
os.makedirs(hf)
shards = {
    "model-00001-of-00003.safetensors": {"embed.weight": f32(64, 16), "norm.weight": bf16(64)},
    "model-00002-of-00003.safetensors": {"layers.0.w": f32(64, 32), "layers.0.b": f32(32)},
    "model-00003-of-00003.safetensors": {"layers.1.w": f32(128, 40), "layers.1.b": bf16(40)},
}
weight_map = {}
for fname, ts in shards.items():
    write_safetensors(f"{hf}/{fname}", ts)
    weight_map.update({t: fname for t in ts})
index = f"{hf}/model.safetensors.index.json"
json.dump({"metadata": {"total_size": sum(len(r) for ts in shards.values() for _, _, r in ts.values())}, "weight_map": weight_map},
          open(index, "w"), indent=2)
open(f"{hf}/config.json", "w").write('{"model_type": "test"}')  # a file of the directory outside the set
golden = tree_sha(hf)
data_bits = {f: 8 * sum(len(r) for _, _, r in ts.values()) for f, ts in shards.items()}

# inspect: by index and by directory, the same tensors, every data bit of every shard.
for entry in (index, hf):
    info = json.loads(flip("inspect", entry, "--json").stdout)
    if info["format"] != "shards":
        fail(f"inspect {entry}: format {info['format']}")
    names = {d["dataset"]: d for d in info["datasets"]}
    if set(names) != {"/" + t for t in weight_map}:
        fail(f"inspect {entry}: datasets {sorted(names)}")
    for t, f in weight_map.items():
        if names["/" + t].get("location", {}).get("file") != f:
            fail(f"inspect {entry}: {t} not located in {f}: {names['/' + t]}")
    if int(info["total_bits"]) != sum(data_bits.values()):
        fail(f"inspect {entry}: total_bits {info['total_bits']}, the shards hold {sum(data_bits.values())}")


def check_flipped(out_dir, n, log):
    """Exactly n bits differ over the shards, each shard's header is unchanged, each record's file
    is the shard holding its tensor and the changed words are where the records say."""
    total, per_file = 0, {}
    for f in shards:
        h0, a = read_safetensors(f"{hf}/{f}")
        h1, b = read_safetensors(f"{out_dir}/{f}")
        if h0 != h1:
            fail(f"{out_dir}/{f}: header bytes changed")
        k = sum(bits(a[t], b[t]) for t in a)
        per_file[f] = k
        total += k
    if total != n:
        fail(f"{out_dir}: {total} bits differ over the shards, expected {n}")
    for r in log_records(log):
        t = r["dataset"][1:]
        if r.get("location") != {"file": weight_map[t]}:
            fail(f"log {log}: record {r['seq']} of {t} has location {r.get('location')}, want file {weight_map[t]}")
    return per_file


# inject -o: the output is a directory holding the index and the shards.
flip("inject", index, "-o", f"{T}/hf-out", "--seed", "5", "--flips", "40", "--log", f"{T}/hf.jsonl")
if sorted(os.listdir(f"{T}/hf-out")) != sorted(["model.safetensors.index.json", *shards]):
    fail(f"inject -o: the output holds {sorted(os.listdir(T + '/hf-out'))}")
check_flipped(f"{T}/hf-out", 40, f"{T}/hf.jsonl")
if tree_sha(hf) != golden:
    fail("inject -o changed the input set")
hdr = json.loads(open(f"{T}/hf.jsonl").readline())
if hdr["file_format"] != "shards" or hdr.get("hash") != "sample-sha256" or not hdr["input_hash"]:
    fail(f"log header: {hdr}")
# The log's identity hash covers every shard: a set with one shard changed elsewhere is refused by
# revert (exit 7, nothing written).
shutil.copytree(f"{T}/hf-out", f"{T}/hf-tampered")
with open(f"{T}/hf-tampered/{sorted(shards)[-1]}", "r+b") as fh:
    fh.seek(-1, 2)
    last = fh.read(1)
    fh.seek(-1, 2)
    fh.write(bytes([last[0] ^ 0x80]))
before = tree_sha(f"{T}/hf-tampered")
p = subprocess.run([FLIP, "revert", f"{T}/hf-tampered", "--log", f"{T}/hf.jsonl"], capture_output=True, text=True)
if p.returncode != 7 or "hash is neither" not in p.stderr or tree_sha(f"{T}/hf-tampered") != before:
    fail(f"revert of a set with a changed shard: exit {p.returncode}, {p.stderr!r}")
# replay onto a fresh copy (a new directory named with a trailing slash, as inject --help shows): the
# same bytes as the output; revert of the output: the input again.
flip("replay", hf, "--log", f"{T}/hf.jsonl", "-o", f"{T}/hf-replayed/")
for f in shards:
    if sha(f"{T}/hf-replayed/{f}") != sha(f"{T}/hf-out/{f}"):
        fail(f"replay: {f} differs from the injected output")
flip("revert", f"{T}/hf-out", "--log", f"{T}/hf.jsonl")
for f in [*shards, "model.safetensors.index.json"]:
    if sha(f"{T}/hf-out/{f}") != golden[f]:
        fail(f"revert: {f} is not byte-identical to the input")

# --log naming one of the set's files: refused before anything is written (it would replace a shard).
p = subprocess.run([FLIP, "inject", hf, "--in-place", "--seed", "1", "--flips", "1", "--log", f"{hf}/model-00002-of-00003.safetensors"],
                   capture_output=True, text=True)
if p.returncode != 2 or "model-00002-of-00003.safetensors" not in p.stderr or tree_sha(hf) != golden:
    fail(f"--log on a shard of the input: exit {p.returncode}: {p.stderr}")

# in place on a copy of the directory: the draw spans the files in proportion to their bits.
shutil.copytree(hf, f"{T}/hf-work")
flip("inject", f"{T}/hf-work", "--in-place", "--seed", "9", "--flips", "4000", "--log", f"{T}/many.jsonl")
per_file = check_flipped(f"{T}/hf-work", 4000, f"{T}/many.jsonl")
total_bits = sum(data_bits.values())
for f, k in per_file.items():
    want = 4000 * data_bits[f] / total_bits
    if abs(k - want) > 5 * (want * (1 - data_bits[f] / total_bits)) ** 0.5 + 1:
        fail(f"{f}: {k} of 4000 flips, expected about {want:.0f} (its share of the stored bits)")
# diff sees the flips per tensor; scan reads the set.
d = json.loads(flip("diff", hf, f"{T}/hf-work", "--json").stdout)["datasets"]
if sum(int(x["differing"]) for x in d) < 3000 or {x["dataset"] for x in d} != {"/" + t for t in weight_map}:
    fail(f"diff over the set: {d}")
p = subprocess.run([FLIP, "scan", f"{T}/hf-work"], capture_output=True, text=True)
if p.returncode not in (0, 10):
    fail(f"scan of a set: exit {p.returncode}: {p.stderr}")
flip("revert", f"{T}/hf-work", "--log", f"{T}/many.jsonl")
if tree_sha(f"{T}/hf-work") != golden:
    fail("revert in place: the set is not byte-identical to the input")

# A directory of *.safetensors without an index: the same set.
os.makedirs(f"{T}/noindex")
for f in shards:
    shutil.copy(f"{hf}/{f}", f"{T}/noindex/{f}")
info = json.loads(flip("inspect", f"{T}/noindex", "--json").stdout)
if int(info["total_bits"]) != total_bits:
    fail("a directory of shards without an index: not every data bit")
flip("inject", f"{T}/noindex", "--in-place", "--seed", "2", "--flips", "12", "--log", f"{T}/noindex.jsonl")
flip("revert", f"{T}/noindex", "--log", f"{T}/noindex.jsonl")
for f in shards:
    if sha(f"{T}/noindex/{f}") != golden[f]:
        fail(f"index-less directory: {f} not restored")

# --- pytorch_model.bin shards (torch.save of each part of a state_dict), with a tied weight.
bt = f"{T}/bin"
os.makedirs(bt)
emb = torch.randn(32, 8)
parts = {"pytorch_model-00001-of-00002.bin": {"embed.weight": emb, "lm_head.weight": emb, "norm.weight": torch.randn(8).half()},
         "pytorch_model-00002-of-00002.bin": {"fc.weight": torch.randn(24, 8), "fc.bias": torch.randn(24)}}
bmap = {}
for f, sd in parts.items():
    torch.save(sd, f"{bt}/{f}")
    bmap.update({t: f for t in sd})
json.dump({"metadata": {}, "weight_map": bmap}, open(f"{bt}/pytorch_model.bin.index.json", "w"))
bgold = tree_sha(bt)
info = json.loads(flip("inspect", f"{bt}/pytorch_model.bin.index.json", "--json").stdout)
want_bits = 8 * (32 * 8 * 4 + 8 * 2 + 24 * 8 * 4 + 24 * 4)  # the tied storage once
if int(info["total_bits"]) != want_bits:
    fail(f".bin shards: total_bits {info['total_bits']}, want {want_bits}")
flip("inject", bt, "--in-place", "--seed", "3", "--flips", "30", "--log", f"{T}/bin.jsonl")
n = 0
for f, sd in parts.items():
    if zipfile.ZipFile(f"{bt}/{f}").testzip() is not None:
        fail(f"{f}: a zip member's CRC-32 does not match after the flips")
    got = torch.load(f"{bt}/{f}")
    for t, v in sd.items():
        if t == "lm_head.weight":
            if got[t].data_ptr() != got["embed.weight"].data_ptr():
                fail("the tied weight is no longer one storage")
            continue
        a, b = v.contiguous().view(torch.uint8).numpy(), got[t].contiguous().view(torch.uint8).numpy()
        n += bits(a, b)
if n != 30:
    fail(f".bin shards: {n} bits differ after torch.load, expected 30")
for r in log_records(f"{T}/bin.jsonl"):
    t = r["dataset"][1:]
    if r.get("location") != {"file": bmap[t]}:
        fail(f".bin log: {t} located {r.get('location')}")
flip("revert", f"{bt}/pytorch_model.bin.index.json", "--log", f"{T}/bin.jsonl")
if tree_sha(bt) != bgold:
    fail(".bin shards: revert is not byte-identical")

# --- a campaign over the set (by its directory): trials inject and restore across the shards.
cfg = {"checkpoint": hf, "command": "echo '{\"test_accuracy\": 0.5}' > {out}", "timeout_s": 60, "trials": 6, "seed": 11,
       "inject": {"flips": 3}}
json.dump(cfg, open(f"{T}/campaign.json", "w"))
flip("campaign", f"{T}/campaign.json", "--out", f"{T}/camp", "-q")
recs = [json.loads(l) for f in sorted(os.listdir(f"{T}/camp/results")) for l in open(f"{T}/camp/results/{f}")]
trials = [r for r in recs if "trial" in r and "flips" in r]
if len(trials) != 6 or any(len(r["flips"]) != 3 for r in trials):
    fail(f"campaign over the set: {len(trials)} trial records")
for r in trials:
    for fl in r["flips"]:
        if fl.get("location") != {"file": weight_map[fl["dataset"][1:]]}:
            fail(f"campaign record: flip {fl} does not name its shard")
if tree_sha(hf) != golden:
    fail("the campaign changed the golden set")
for root, _, files in os.walk(f"{T}/camp/work"):
    for f in files:
        if f in golden and sha(os.path.join(root, f)) != golden[f]:
            fail(f"campaign work copy {root}/{f} not restored")


# --- hostile sets: one line naming the file, the documented exit code, nothing written.
def refused(entry, rc, names, tag):
    where = entry if os.path.isdir(entry) else os.path.dirname(entry)
    before = tree_sha(where)
    for args in (["inspect", entry], ["inject", entry, "-o", f"{T}/never", "--seed", "1", "--flips", "1", "--log", f"{T}/never.jsonl"],
                 ["inject", entry, "--in-place", "--seed", "1", "--flips", "1", "--log", f"{T}/never.jsonl"]):
        p = subprocess.run([FLIP, *args], capture_output=True, text=True)
        if p.returncode != rc:
            fail(f"{tag}: {' '.join(args)}: exit {p.returncode}, want {rc}\n{p.stdout}{p.stderr}")
        lines = p.stderr.strip().splitlines()
        if len(lines) != 1 or names not in lines[0]:
            fail(f"{tag}: want one error line naming {names}: {p.stderr!r}")
        for path in (f"{T}/never", f"{T}/never.jsonl"):
            if os.path.exists(path):
                fail(f"{tag}: a refused run left {path}")
    if before != tree_sha(where):
        fail(f"{tag}: a refused run changed the input")


def hostile(tag, mutate):
    d = f"{T}/bad-{tag}"
    shutil.copytree(hf, d)
    mutate(d)
    return d


def index_with(d, m):
    json.dump({"weight_map": m}, open(f"{d}/model.safetensors.index.json", "w"))


first = "model-00001-of-00003.safetensors"
d = hostile("dotdot", lambda d: index_with(d, {**weight_map, "embed.weight": "../" + first}))
refused(f"{d}/model.safetensors.index.json", 4, "model.safetensors.index.json", "index naming ../")
d = hostile("subdir", lambda d: index_with(d, {**weight_map, "embed.weight": "sub/" + first}))
refused(d, 4, "model.safetensors.index.json", "index naming a path")
d = hostile("missing", lambda d: os.remove(f"{d}/model-00002-of-00003.safetensors"))
refused(d, 3, "model-00002-of-00003.safetensors", "missing shard")


def link_elsewhere(d):
    os.remove(f"{d}/{first}")
    if os.getuid() == 0:  # root makes another user's file: a copy of the shard, given to uid 4242
        shutil.copy(f"{hf}/{first}", f"{T}/others.safetensors")
        os.chown(f"{T}/others.safetensors", 4242, 4242)
        os.symlink(f"{T}/others.safetensors", f"{d}/{first}")
    else:
        os.symlink("/etc/hostname", f"{d}/{first}")  # root's file


if os.getuid() == 0 or os.stat("/etc/hostname").st_uid != os.getuid():
    d = hostile("link", link_elsewhere)
    refused(d, 3, first, "link to another user's file")
d = hostile("twice", lambda d: open(f"{d}/model.safetensors.index.json", "w").write(
    '{"weight_map": {"embed.weight": "%s", "embed.weight": "%s"}}' % (first, first)))
refused(d, 4, "model.safetensors.index.json", "tensor listed twice")
d = hostile("wrongfile", lambda d: index_with(d, {**weight_map, "embed.weight": "model-00002-of-00003.safetensors"}))
refused(d, 4, "embed.weight", "index naming the wrong shard")


def two_shards(d):
    write_safetensors(f"{d}/model-00002-of-00003.safetensors", {**shards["model-00002-of-00003.safetensors"], "embed.weight": f32(64, 16)})


d = hostile("intwo", two_shards)
refused(d, 4, "embed.weight", "one tensor in two shards")
d = hostile("twoindex", lambda d: shutil.copy(f"{d}/model.safetensors.index.json", f"{d}/pytorch_model.bin.index.json"))
refused(d, 2, "index", "two indexes in one directory")
os.makedirs(f"{T}/empty")
refused(f"{T}/empty", 3, f"{T}/empty", "a directory without shards")
print("ok")
