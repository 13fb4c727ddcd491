#!/usr/bin/python3
"""ckpt-flip on torch.save checkpoints: a CNN with BatchNorm, a tied weight, f16 and
bf16 tensors and its Adam state, saved with torch.save. After inject --flips N (in place and with
-o) torch.load reads the file, exactly N bits differ over all storages (each compared once, as
integer words), counters are untouched, zipfile's testzip() is clean (or names the touched member
with --keep-crc) and revert restores the file byte for byte. argv: ckpt-flip binary, scratch dir."""
import json, os, shutil, subprocess, sys, zipfile

import numpy as np
import torch

from ckpt_flip_pytest import FLIP, T, fail, flip, sha


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.emb = torch.nn.Embedding(10, 6)
        self.fc = torch.nn.Linear(4 * 6 * 6, 10)
        self.out = torch.nn.Linear(6, 10, bias=False)
        self.out.weight = self.emb.weight  # tied: one storage, two names

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x))).flatten(1)
        return self.fc(h) + self.out(self.emb(torch.zeros(x.shape[0], dtype=torch.long))).squeeze(1)


torch.manual_seed(0)
net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for _ in range(2):
    loss = net(torch.randn(8, 1, 8, 8)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
ckpt = f"{T}/ckpt.pt"
torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
            "extra": {"half": torch.randn(64).half(), "bf16": torch.randn(64).to(torch.bfloat16)}}, ckpt)
original = sha(ckpt)

INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def storages(path):
    """Each storage once (by its data pointer): its whole content as integer words."""
    out, seen = {}, {}

    def walk(prefix, v):
        if isinstance(v, torch.Tensor):
            s = v.storage()
            key = s.data_ptr()
            if key in seen:
                return
            whole = torch.empty(0, dtype=v.dtype).set_(s)
            seen[key] = prefix
            out[prefix] = whole.view(INT[whole.element_size()]).numpy().copy()
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}/{k}", x)
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                walk(f"{prefix}/{i}", x)

    walk("", torch.load(path))
    return out


def bits_differing(a, b):
    if a.keys() != b.keys():
        fail(f"storages differ: {sorted(a)} vs {sorted(b)}")
    return {k: int(np.unpackbits((a[k] ^ b[k]).view(np.uint8)).sum()) for k in a}


def counters(path):
    s = torch.load(path)
    return (int(s["model"]["bn.num_batches_tracked"]), [float(v["step"]) for v in s["optimizer"]["state"].values()], s["epoch"])


base = storages(ckpt)
base_counters = counters(ckpt)

# inspect: the tied weight is one storage with an alias; counters are listed but not in the default selection.
info = json.loads(flip("inspect", ckpt, "--json").stdout)
names = {d["dataset"]: d for d in info["datasets"]}
tied = [d for d in info["datasets"] if "/model/out.weight" in d.get("aliases", []) or d["dataset"] == "/model/out.weight"]
if len(tied) != 1 or tied[0]["dataset"] != "/model/emb.weight":
    fail(f"the tied weight is not one storage named /model/emb.weight with alias /model/out.weight: {tied}")
if "/model/out.weight" in names:
    fail("the tied weight's second name is listed as its own tensor")
if names["/extra/half"]["dtype"] != "f16" or names["/extra/bf16"]["dtype"] != "bf16":
    fail(f"f16/bf16 dtypes: {names['/extra/half']['dtype']} {names['/extra/bf16']['dtype']}")
total = sum(int(np.asarray(v).size) * v.dtype.itemsize * 8 for v in base.values())
if int(info["total_bits"]) != total:
    fail(f"inspect's fault space {info['total_bits']} is not the storages' {total} bits (each storage once)")


def check_injected(path, n, log):
    got = bits_differing(base, storages(path))  # torch.load reads it
    if sum(got.values()) != n:
        fail(f"{path}: {sum(got.values())} bits differ, expected {n}: {got}")
    if counters(path) != base_counters:
        fail(f"{path}: counters changed: {counters(path)} vs {base_counters}")
    bad = zipfile.ZipFile(path).testzip()
    if bad is not None:
        fail(f"{path}: testzip() reports {bad} after inject")
    header = json.loads(open(log).readline())
    if header.get("file_format") != "torch":
        fail(f"log header lacks file_format torch: {header}")
    return got


# -o: the input is never changed; same seed, same file.
for n in (1, 25):
    flip("inject", ckpt, "-o", f"{T}/bad{n}.pt", "--seed", "7", "--flips", str(n), "--log", f"{T}/bad{n}.jsonl")
    if sha(ckpt) != original:
        fail("inject -o changed its input")
    check_injected(f"{T}/bad{n}.pt", n, f"{T}/bad{n}.jsonl")
flip("inject", ckpt, "-o", f"{T}/again.pt", "--seed", "7", "--flips", "25", "--log", f"{T}/again.jsonl")
if sha(f"{T}/again.pt") != sha(f"{T}/bad25.pt"):
    fail("same seed, different result")
# replay gives the same bytes; diff counts the flips; scan reads every storage.
flip("replay", ckpt, "--log", f"{T}/bad25.jsonl", "-o", f"{T}/replayed.pt")
if sha(f"{T}/replayed.pt") != sha(f"{T}/bad25.pt"):
    fail("replay -o is not byte-identical to the injected file")
d = json.loads(flip("diff", ckpt, f"{T}/bad25.pt", "--json").stdout)
diffbits = sum(sum(int(c) for c in x["bit_histogram"].values()) for x in d["datasets"])
if diffbits != 25:
    fail(f"diff counts {diffbits} differing bits, expected 25")
p = subprocess.run([FLIP, "scan", ckpt], capture_output=True, text=True)
if p.returncode not in (0, 10):
    fail(f"scan: exit {p.returncode}\n{p.stderr}")
# revert restores every byte, CRCs included.
flip("revert", f"{T}/bad25.pt", "--log", f"{T}/bad25.jsonl")
if sha(f"{T}/bad25.pt") != original:
    fail("revert of -o output is not byte-identical to the original")

# In place, then revert.
work = f"{T}/work.pt"
shutil.copy(ckpt, work)
flip("inject", work, "--in-place", "--seed", "11", "--flips", "40", "--log", f"{T}/inplace.jsonl")
check_injected(work, 40, f"{T}/inplace.jsonl")
flip("revert", work, "--log", f"{T}/inplace.jsonl")
if sha(work) != original:
    fail("revert after --in-place is not byte-identical")

# Counters only when named; then the counter changes and still N bits differ.
flip("inject", ckpt, "-o", f"{T}/cnt.pt", "--seed", "1", "--flips", "1", "--include", "/model/bn.num_batches_tracked", "--log", f"{T}/cnt.jsonl")
if counters(f"{T}/cnt.pt")[0] == base_counters[0]:
    fail("--include naming num_batches_tracked did not flip it")
for line in open(f"{T}/bad25.jsonl"):
    r = json.loads(line)
    if r.get("type") == "flip" and ("num_batches_tracked" in r["dataset"] or r["dataset"].endswith("/step")):
        fail(f"a counter was hit by default: {r['dataset']}")

# The tied storage: flips counted once, both names see them.
flip("inject", ckpt, "-o", f"{T}/tied.pt", "--seed", "3", "--flips", "6", "--include", "/model/out.weight", "--log", f"{T}/tied.jsonl")
got = bits_differing(base, storages(f"{T}/tied.pt"))
if sum(got.values()) != 6 or got.get("/model/emb.weight") != 6:
    fail(f"tied weight: {got}")
s = torch.load(f"{T}/tied.pt")["model"]
if not torch.equal(s["emb.weight"], s["out.weight"]):
    fail("the tied names no longer share their bytes")

# f16 and bf16 in their own width: exponent flips stay in the 16-bit exponent field.
for name, field in (("half", 0x7C00), ("bf16", 0x7F80)):
    flip("inject", ckpt, "-o", f"{T}/{name}.pt", "--seed", "5", "--flips", "30", "--bits", "exponent",
         "--include", f"/extra/{name}", "--log", f"{T}/{name}.jsonl")
    recs = [r for r in map(json.loads, open(f"{T}/{name}.jsonl")) if r["type"] == "flip"]
    want = "f16" if name == "half" else "bf16"
    if len(recs) != 30 or any(r["dtype"] != want or int(r["mask"], 16) & ~field for r in recs):
        fail(f"{name}: records are not 16-bit exponent flips of dtype {want}")
    a = base[f"/extra/{name}"].view(np.uint16)
    b = storages(f"{T}/{name}.pt")[f"/extra/{name}"].view(np.uint16)
    x = a ^ b
    if int(np.unpackbits(x.view(np.uint8)).sum()) != 30 or np.any(x & ~np.uint16(field)):
        fail(f"{name}: the file's changes are not 30 exponent bits of 16-bit words")

# --keep-crc: the touched member's CRC is left stale (testzip names it); revert restores every byte.
flip("inject", ckpt, "-o", f"{T}/keep.pt", "--seed", "9", "--flips", "3", "--keep-crc", "--include", "/model/fc.weight", "--log", f"{T}/keep.jsonl")
bad = zipfile.ZipFile(f"{T}/keep.pt").testzip()
member = [n for n in zipfile.ZipFile(ckpt).namelist() if n.endswith("/data/" + bad.rsplit("/", 1)[-1])] if bad else []
if bad is None or not member:
    fail(f"--keep-crc: testzip() reports {bad}, expected the fc.weight member")
if not json.loads(open(f"{T}/keep.jsonl").readline()).get("keep_crc"):
    fail("--keep-crc is not in the log header")
flip("revert", f"{T}/keep.pt", "--log", f"{T}/keep.jsonl")
if sha(f"{T}/keep.pt") != original:
    fail("revert of a --keep-crc injection is not byte-identical")

# Bad input: one line naming the file, exit 4, input untouched (a legacy torch.save file cut short).
legacy = f"{T}/legacy.pt"
torch.save({"w": torch.ones(3)}, legacy, _use_new_zipfile_serialization=False)
open(legacy, "r+b").truncate(os.path.getsize(legacy) - 2)
before = sha(legacy)
p = flip("inject", legacy, "--in-place", "--seed", "1", "--flips", "1", "--log", f"{T}/legacy.jsonl", rc=4)
if len(p.stderr.strip().splitlines()) != 1 or legacy not in p.stderr:
    fail(f"truncated legacy torch file: not one line naming the file: {p.stderr!r}")
if sha(legacy) != before:
    fail("a refused input changed")
# scan on a real model state in half precision: torch.nn.Linear/LayerNorm/Embedding tensors cast to f16
# and bf16 scan clean; the exponent-MSB flip of one typical weight (f16 x2^16, bf16 x2^128) is caught. A
# fixed 24-binade margin exceeded f16's whole exponent range and missed it.
torch.manual_seed(3)
model = torch.nn.Sequential(torch.nn.Embedding(300, 64), torch.nn.Linear(64, 256), torch.nn.LayerNorm(256), torch.nn.Linear(256, 64))
for dt, bit in ((torch.float16, 14), (torch.bfloat16, 14)):
    state = {k: v.detach().to(dt).clone() for k, v in model.state_dict().items()}
    half = f"{T}/half.pt"
    torch.save(state, half)
    flip("scan", half)
    w = state["1.weight"].view(torch.int16)
    i = int(torch.argmin((state["1.weight"].float().abs() - state["1.weight"].float().abs().median()).abs()))
    w.view(-1)[i] ^= 1 << bit
    torch.save(state, half)
    p = flip("scan", half, "--json", rc=10)
    got = {d["dataset"]: d["exponent_outliers"] for d in json.loads(p.stdout)["datasets"] if d["suspect"]}
    if got != {"/1.weight": 1}:
        fail(f"{dt}: exponent-MSB flip of a median weight: {got}")
print("ok")
