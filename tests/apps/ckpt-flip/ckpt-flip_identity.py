#!/usr/bin/python3
"""How a flip log identifies its file (docs/reference/flip-log.md#file-identity). The logged hashes
equal sample_sha256.py's (the definition written again with hashlib) on raw files of every size class;
revert and replay refuse a file whose hash is neither the log's input nor output (exit 7, the file
unchanged) and --force overrides; a change between two samples passes a sample-sha256 log and not a
sha256 one; a log without a footer is checked per word only; logs written before "hash" existed
(input_sha256/output_sha256, or empty ones) still revert, checked by SHA-256.
argv: ckpt-flip binary, scratch dir."""
import json, os, shutil, struct, subprocess

import numpy as np
import torch

from ckpt_flip_pytest import FLIP, T, fail, flip, sha
from sample_sha256 import ranges, sample_sha256


def lines(log):
    return [json.loads(l) for l in open(log)]


def refused(args, what):
    """ckpt-flip exits 7 with one error line naming `what`."""
    p = flip(*args, rc=7)
    err = p.stderr.strip().splitlines()
    if len(err) != 1 or what not in err[0]:
        fail(f"ckpt-flip {' '.join(args)}: want one error line naming {what!r}, got {p.stderr!r}")


def poke(path, off):
    """Flip the low bit of the byte at `off`."""
    with open(path, "r+b") as f:
        f.seek(off)
        b = f.read(1)[0]
        f.seek(off)
        f.write(bytes([b ^ 1]))


# --- the logged hashes are sample_sha256.py's, before and after, on files of every size class
for n in (1, 4095, 4 << 20, (4 << 20) + 1, 5_000_003):
    p = f"{T}/raw{n}.bin"
    open(p, "wb").write(np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes())
    before = sample_sha256(p)
    flip("inject", p, "--in-place", "--raw", "--seed", "3", "--flips", "1", "--log", f"{T}/raw.jsonl")
    h, foot = lines(f"{T}/raw.jsonl")[0], lines(f"{T}/raw.jsonl")[-1]
    if h["hash"] != "sample-sha256" or h["input_hash"] != before or foot["output_hash"] != sample_sha256(p):
        fail(f"{n} bytes: logged {h['hash']} {h['input_hash']} -> {foot['output_hash']}, "
             f"sample_sha256.py {before} -> {sample_sha256(p)}")
    if before == foot["output_hash"] and n <= 4 << 20:
        fail(f"{n} bytes: a file hashed whole kept its hash after a flip")
    if "input_sha256" in h or "output_sha256" in foot:
        fail("a sample-sha256 log holds sha256 keys")
# a sparse file of 1 TiB: 64-bit offsets throughout, 1.1 MiB read
sp = f"{T}/sparse.bin"
with open(sp, "wb") as f:
    f.truncate((1 << 40) + 12345)
    f.seek(ranges((1 << 40) + 12345)[100][0] + 7)
    f.write(b"resil")
before = sample_sha256(sp)
flip("inject", sp, "--in-place", "--raw", "--seed", "3", "--flips", "1", "--log", f"{T}/raw.jsonl")
if lines(f"{T}/raw.jsonl")[0]["input_hash"] != before or lines(f"{T}/raw.jsonl")[-1]["output_hash"] != sample_sha256(sp):
    fail("1 TiB sparse file: logged hashes are not sample_sha256.py's")
os.remove(sp)

# --- a safetensors file of 5.6 MB (hashed by its sample): tensor a is flipped, b is not
def write_safetensors(path, tensors):
    header, data = {}, b""
    for name, arr in tensors.items():
        raw = arr.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
    return 8 + len(h)


rng = np.random.default_rng(5)
orig = f"{T}/orig.safetensors"
base = write_safetensors(orig, {"a": rng.standard_normal(700_000), "b": rng.standard_normal(700_000)})
size = os.path.getsize(orig)
b_lo, b_hi = base + 2_800_000, base + 5_600_000  # b's bytes
sampled = [o for o, n in ranges(size) if n == 4096 and b_lo <= o and o + 4096 <= b_hi]
in_sample = sampled[3] + 100
between = sampled[3] + 4096 + 100  # after that block, before the next one
if any(o <= between < o + n for o, n in ranges(size)):
    fail("the test's unsampled offset is sampled")
orig_sha = sha(orig)
f = f"{T}/f.safetensors"
shutil.copy(orig, f)
flip("inject", f, "--in-place", "--include", "a", "--seed", "1", "--flips", "3", "--log", f"{T}/l.jsonl")
after = sha(f)
h, foot = lines(f"{T}/l.jsonl")[0], lines(f"{T}/l.jsonl")[-1]
if h["input_hash"] != sample_sha256(orig) or foot["output_hash"] != sample_sha256(f):
    fail("in-place safetensors: logged hashes are not sample_sha256.py's")

# b changed inside the sample: revert and replay refuse (exit 7), the file unchanged; --force reverts
shutil.copy(f, f"{T}/g.safetensors")
poke(f"{T}/g.safetensors", in_sample)
g_sha = sha(f"{T}/g.safetensors")
refused(("revert", f"{T}/g.safetensors", "--log", f"{T}/l.jsonl"), "sample-sha256")
refused(("replay", f"{T}/g.safetensors", "--log", f"{T}/l.jsonl", "-o", f"{T}/r.safetensors"), "l.jsonl")
if sha(f"{T}/g.safetensors") != g_sha or os.path.exists(f"{T}/r.safetensors"):
    fail("a refused revert/replay changed the file or left an output")
flip("revert", f"{T}/g.safetensors", "--log", f"{T}/l.jsonl", "--force")
poke(f"{T}/g.safetensors", in_sample)
if sha(f"{T}/g.safetensors") != orig_sha:
    fail("revert --force did not restore the logged words")

# b changed between two samples: a sample-sha256 log cannot see it (per-word checks pass); sha256 can
shutil.copy(f, f"{T}/g.safetensors")
poke(f"{T}/g.safetensors", between)
flip("revert", f"{T}/g.safetensors", "--log", f"{T}/l.jsonl")
shutil.copy(orig, f"{T}/s.safetensors")
flip("inject", f"{T}/s.safetensors", "--in-place", "--include", "a", "--seed", "1", "--flips", "3", "--hash", "sha256",
     "--log", f"{T}/s.jsonl")
h = lines(f"{T}/s.jsonl")[0]
if h["hash"] != "sha256" or h["input_hash"] != orig_sha or h["input_sha256"] != orig_sha or \
        lines(f"{T}/s.jsonl")[-1]["output_sha256"] != sha(f"{T}/s.safetensors"):
    fail(f"--hash sha256: header {h}")
poke(f"{T}/s.safetensors", between)
refused(("revert", f"{T}/s.safetensors", "--log", f"{T}/s.jsonl"), "sha256")

# the right file before or after its flips passes: revert, revert again (already original), replay
flip("revert", f, "--log", f"{T}/l.jsonl")
if sha(f) != orig_sha:
    fail("revert did not restore the file byte for byte")
flip("revert", f, "--log", f"{T}/l.jsonl")
flip("replay", f, "--log", f"{T}/l.jsonl")
if sha(f) != after:
    fail("replay did not give the injected file again")

# a log without its footer (an interrupted injection) is checked per word only
cut = f"{T}/cut.jsonl"
open(cut, "w").writelines(open(f"{T}/l.jsonl").readlines()[:-1])
shutil.copy(f, f"{T}/g.safetensors")
poke(f"{T}/g.safetensors", in_sample)
flip("revert", f"{T}/g.safetensors", "--log", cut)

# -o: the header holds both hashes, the footer the output's
flip("inject", orig, "-o", f"{T}/o.safetensors", "--seed", "2", "--flips", "5", "--log", f"{T}/o.jsonl")
h, foot = lines(f"{T}/o.jsonl")[0], lines(f"{T}/o.jsonl")[-1]
if h["input_hash"] != sample_sha256(orig) or h["output_hash"] != sample_sha256(f"{T}/o.safetensors") or foot["output_hash"] != h["output_hash"]:
    fail(f"-o: header {h}, footer {foot}")

# --hash none / --no-hash: nothing logged, nothing checked; both at once is a usage error
for how in (("--no-hash",), ("--hash", "none")):
    flip("inject", orig, "-o", f"{T}/n.safetensors", "--seed", "2", "--flips", "5", "--log", f"{T}/n.jsonl", *how)
    h = lines(f"{T}/n.jsonl")[0]
    if h["hash"] != "none" or h["input_hash"] or h["output_hash"] or lines(f"{T}/n.jsonl")[-1]["output_hash"]:
        fail(f"{how}: {h}")
poke(f"{T}/n.safetensors", in_sample)
flip("revert", f"{T}/n.safetensors", "--log", f"{T}/n.jsonl")
flip("inject", orig, "-o", f"{T}/n.safetensors", "--seed", "2", "--flips", "5", "--log", f"{T}/n.jsonl", "--no-hash",
     "--hash", "sha256", rc=2)
flip("inject", orig, "-o", f"{T}/n.safetensors", "--seed", "2", "--flips", "5", "--log", f"{T}/n.jsonl", "--hash", "xxh3", rc=2)

# --- logs written before "hash" existed: SHA-256 in input_sha256/output_sha256 (or "" for none)
pt = f"{T}/m.pt"
torch.save({"w": torch.randn(64, 32), "b": torch.randn(32)}, pt)
pt_sha = sha(pt)
flip("inject", pt, "-o", f"{T}/m2.pt", "--seed", "4", "--flips", "6", "--hash", "sha256", "--log", f"{T}/new.jsonl")


def as_old(src, dst, empty=False):
    out = []
    for j in lines(src):
        if j["type"] == "header":
            for k in ("hash", "input_hash", "output_hash"):
                j.pop(k)
            if empty:
                j["input_sha256"] = j["output_sha256"] = ""
        elif j["type"] == "footer":
            j.pop("output_hash")
            if empty:
                j["output_sha256"] = ""
        out.append(json.dumps(j) + "\n")
    open(dst, "w").writelines(out)


as_old(f"{T}/new.jsonl", f"{T}/old.jsonl")
old = lines(f"{T}/old.jsonl")
if old[0]["input_sha256"] != pt_sha or "hash" in old[0] or "output_hash" in old[-1]:
    fail(f"the old-style log is not one: {old[0]}")
shutil.copy(f"{T}/m2.pt", f"{T}/m3.pt")
flip("revert", f"{T}/m2.pt", "--log", f"{T}/old.jsonl")
if sha(f"{T}/m2.pt") != pt_sha:
    fail("an old sha256 log did not revert the file byte for byte")
flip("replay", f"{T}/m2.pt", "--log", f"{T}/old.jsonl")
if sha(f"{T}/m2.pt") != sha(f"{T}/m3.pt"):
    fail("an old sha256 log did not replay")
torch.save({"w": torch.randn(64, 32), "b": torch.randn(32)}, f"{T}/other.pt")  # same layout, other values
p = flip("revert", f"{T}/other.pt", "--log", f"{T}/old.jsonl", rc=7)
if "sha256" not in p.stderr:
    fail(f"an old sha256 log on another file: {p.stderr!r}")
as_old(f"{T}/new.jsonl", f"{T}/old-none.jsonl", empty=True)
flip("revert", f"{T}/m3.pt", "--log", f"{T}/old-none.jsonl")
if sha(f"{T}/m3.pt") != pt_sha:
    fail("an old --no-hash log did not revert")
print("ok")
