#!/usr/bin/python3
"""ckpt-flip on safetensors, .npy and .npz files. safetensors files come from a tiny
writer here (8-byte length, JSON header, data), NumPy's from np.save/np.savez/np.savez_compressed.
After inject --flips N exactly N bits differ (arrays compared as integer words), the header bytes
are unchanged, zip members stay valid, and revert restores the file byte for byte.
argv: ckpt-flip binary, scratch dir."""
import json, os, shutil, struct, subprocess, sys, zipfile

import numpy as np

from ckpt_flip_pytest import FLIP, T, bits, fail, flip, read_safetensors, sha, write_safetensors

rng = np.random.default_rng(19)


# --- safetensors: our own writer; bf16/fp8 as raw 2- and 1-byte words.
ST_DT = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


st = f"{T}/model.safetensors"
tensors = {
    "w.f32": ("F32", (32, 8), rng.standard_normal((32, 8)).astype("<f4").tobytes()),
    "w.f16": ("F16", (40,), rng.standard_normal(40).astype("<f2").tobytes()),
    "w.bf16": ("BF16", (40,), (rng.standard_normal(40).astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()),
    "w.f8": ("F8_E4M3", (64,), rng.integers(0, 0x7E, 64, dtype=np.uint8).tobytes()),
    "w.f8b": ("F8_E5M2", (64,), rng.integers(0, 0x7B, 64, dtype=np.uint8).tobytes()),
    "b.f64": ("F64", (5,), rng.standard_normal(5).tobytes()),
    "ids.i64": ("I64", (6,), np.arange(6, dtype="<i8").tobytes()),
    "mask": ("BOOL", (16,), (np.arange(16) % 2).astype(np.uint8).tobytes()),
}
header_len = write_safetensors(st, tensors)
st_sha = sha(st)
st_head, st_base = read_safetensors(st)
info = json.loads(flip("inspect", st, "--json").stdout)
dts = {d["dataset"]: d["dtype"] for d in info["datasets"]}
want = {"/w.f32": "f32", "/w.f16": "f16", "/w.bf16": "bf16", "/w.f8": "f8_e4m3", "/w.f8b": "f8_e5m2", "/b.f64": "f64", "/ids.i64": "i64", "/mask": "bool"}
if dts != want:
    fail(f"safetensors dtypes: {dts}")
if int(info["total_bits"]) != 8 * sum(len(r) for _, _, r in tensors.values()):
    fail("safetensors fault space is not every data bit")
for mode in ("-o", "--in-place"):
    work = f"{T}/st-work.safetensors"
    shutil.copy(st, work)
    target = f"{T}/st-out.safetensors" if mode == "-o" else work
    flip("inject", work, *([mode, target] if mode == "-o" else [mode]), "--seed", "4", "--flips", "50", "--log", f"{T}/st.jsonl")
    head, after = read_safetensors(target)
    if head != st_head:
        fail(f"safetensors {mode}: the header bytes changed")
    n = sum(bits(st_base[k], after[k]) for k in st_base)
    if n != 50:
        fail(f"safetensors {mode}: {n} bits differ, expected 50")
    flip("revert", target, "--log", f"{T}/st.jsonl")
    if sha(target) != st_sha:
        fail(f"safetensors {mode}: revert is not byte-identical")
# fp8 fields: an exponent flip of an E4M3 word lands in bits 3-6, of an E5M2 word in bits 2-6.
for name, field in (("w.f8", 0x78), ("w.f8b", 0x7C)):
    flip("inject", st, "-o", f"{T}/f8.safetensors", "--seed", "2", "--flips", "20", "--bits", "exponent", "--include", f"/{name}", "--log", f"{T}/f8.jsonl")
    recs = [r for r in map(json.loads, open(f"{T}/f8.jsonl")) if r["type"] == "flip"]
    if len(recs) != 20 or any(int(r["mask"], 16) & ~field or r["old"].startswith("0x") and len(r["old"]) != 4 for r in recs):
        fail(f"{name}: exponent flips outside bits {field:#x} of 8-bit words: {recs[:2]}")
    os.remove(f"{T}/f8.safetensors")
# scan on fp8: in E4M3 (OCP "fn") the all-ones exponent holds finite values, 0x78-0x7e (256 to 448)
# and their negatives; only 0x7f/0xff are NaN and there is no Inf. E5M2 is IEEE-like: 0x7c/0xfc
# are +-Inf, 0x7d-0x7f and 0xfd-0xff NaN.
top = list(range(0x78, 0x7F)) + list(range(0xF8, 0xFF))
e4 = f"{T}/e4m3.safetensors"
write_safetensors(e4, {"w": ("F8_E4M3", (len(top) + 30,), bytes(top + [0x50, 0x58, 0xD0] * 10))})
p = flip("scan", e4, "--json")  # exit 0: clean
w = json.loads(p.stdout)["datasets"][0]
if (w["nan"], w["inf"], w["suspect"], w["max_abs"]) != (0, 0, False, 448.0):
    fail(f"scan of finite E4M3 values 0x78-0x7e: {w}")
nans = f"{T}/f8-nan.safetensors"
write_safetensors(nans, {"e4": ("F8_E4M3", (34,), bytes(top + [0x7F, 0xFF, 0x7F] + [0x50] * 17)),
                         "e5": ("F8_E5M2", (8,), bytes([0x7C, 0xFC, 0x7D, 0x7E, 0x7F, 0xFF, 0x3C, 0x40]))})
p = flip("scan", nans, "--json", rc=10)  # suspect
got = {d["dataset"]: (d["nan"], d["inf"]) for d in json.loads(p.stdout)["datasets"]}
if got != {"/e4": (3, 0), "/e5": (4, 2)}:
    fail(f"scan NaN/Inf counts of fp8 (want E4M3 3 NaN 0 Inf, E5M2 4 NaN 2 Inf): {got}")
# A header lying about offsets: one line naming the file, exit 4, untouched.
bad = f"{T}/bad.safetensors"
buf = bytearray(open(st, "rb").read())
buf[8:8 + header_len] = open(st, "rb").read()[8:8 + header_len].replace(b'"data_offsets": [0,', b'"data_offsets": [8,')
open(bad, "wb").write(buf)
before = sha(bad)
p = flip("inject", bad, "--in-place", "--seed", "1", "--flips", "1", "--log", f"{T}/bad.jsonl", rc=4)
if len(p.stderr.strip().splitlines()) != 1 or bad not in p.stderr or sha(bad) != before or os.path.exists(f"{T}/bad.jsonl"):
    fail(f"lying safetensors header: {p.stderr!r}")

# --- .npy: little- and big-endian, Fortran order.
for name, arr in (("le", rng.standard_normal((16, 12)).astype("<f4")), ("be", rng.standard_normal((7, 9)).astype(">f8")),
                  ("fortran", np.asfortranarray(rng.standard_normal((6, 10)).astype("<f2"))), ("ints", np.arange(50, dtype="<i2"))):
    path = f"{T}/{name}.npy"
    np.save(path, arr)
    original = sha(path)
    data_at = os.path.getsize(path) - arr.nbytes
    head = open(path, "rb").read()[:data_at]
    flip("inject", path, "--in-place", "--seed", "8", "--flips", "17", "--log", f"{T}/{name}.jsonl")
    after = np.load(path)
    if open(path, "rb").read()[:data_at] != head:
        fail(f"{name}.npy: header bytes changed")
    if bits(arr, after) != 17:
        fail(f"{name}.npy: {bits(arr, after)} bits differ, expected 17")
    flip("diff", path, path)
    if subprocess.run([FLIP, "scan", path], capture_output=True).returncode not in (0, 10):
        fail(f"{name}.npy: scan failed")
    flip("revert", path, "--log", f"{T}/{name}.jsonl")
    if sha(path) != original:
        fail(f"{name}.npy: revert is not byte-identical")

# --- .npz: stored members in place; deflated members through a staged rewrite (-o, or in place).
arrays = {"w": rng.standard_normal((20, 10)).astype("<f4"), "b": rng.standard_normal(10).astype("<f8"), "h": rng.standard_normal(30).astype("<f2")}


def npz_bits(a_path, b_path):
    a, b = np.load(a_path), np.load(b_path)
    if sorted(a.files) != sorted(b.files):
        fail(f"npz members differ: {a.files} vs {b.files}")
    return sum(bits(a[k], b[k]) for k in a.files)


np.savez(f"{T}/stored.npz", **arrays)
np.savez_compressed(f"{T}/deflated.npz", **arrays)
for kind in ("stored", "deflated"):
    path = f"{T}/{kind}.npz"
    original = sha(path)
    flip("inspect", path)
    flip("inject", path, "-o", f"{T}/{kind}-out.npz", "--seed", "6", "--flips", "23", "--log", f"{T}/{kind}.jsonl")
    if sha(path) != original:
        fail(f"{kind}.npz: inject -o changed its input")
    out = f"{T}/{kind}-out.npz"
    if zipfile.ZipFile(out).testzip() is not None:
        fail(f"{kind}.npz: testzip() reports {zipfile.ZipFile(out).testzip()}")
    if npz_bits(path, out) != 23:
        fail(f"{kind}.npz: {npz_bits(path, out)} bits differ, expected 23")
    flip("revert", out, "--log", f"{T}/{kind}.jsonl")
    if npz_bits(path, out) != 0 or zipfile.ZipFile(out).testzip() is not None:
        fail(f"{kind}.npz: revert did not restore the arrays")
    # Deflated too: the member restored deflates to its old bytes (zipfile's zlib parameters).
    if sha(out) != original:
        fail(f"{kind}.npz: revert is not byte-identical")
    # In place: stored members change word by word; a deflated one is staged (copy, rewrite, rename).
    work = f"{T}/{kind}-work.npz"
    shutil.copy(path, work)
    flip("inject", work, "--in-place", "--seed", "12", "--flips", "9", "--log", f"{T}/{kind}-ip.jsonl")
    if npz_bits(path, work) != 9 or zipfile.ZipFile(work).testzip() is not None:
        fail(f"{kind}.npz in place: not 9 bits, or a bad member")
    flip("revert", work, "--log", f"{T}/{kind}-ip.jsonl")
    if npz_bits(path, work) != 0:
        fail(f"{kind}.npz in place: revert did not restore the arrays")
    if sha(work) != original:
        fail(f"{kind}.npz in place: revert is not byte-identical")
print("ok")
