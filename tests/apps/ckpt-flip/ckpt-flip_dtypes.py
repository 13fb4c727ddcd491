#!/usr/bin/python3
"""ckpt-flip on every dtype tag of the safetensors format, from a writer here (8-byte length, JSON
header, data). Flippable: F64 F32 F16 BF16 F8_E4M3 F8_E5M2 F8_E8M0 F8_E4M3FNUZ F8_E5M2FNUZ I64 I32 I16 I8 U64 U32
U16 U8 BOOL;
recognised and listed as opaque, never written: F4 F6_E2M3 F6_E3M2 (packed) and C64. Checked with
numpy as the independent reader: exactly N bits differ, all in flippable tensors, the header and
the opaque tensors' bytes unchanged, revert byte-identical. FP8 fields and --finite per format:
E8M0 is 8 exponent bits (no sign, no mantissa; 0xFF NaN), E4M3FN has no infinity (only S.1111.111
is NaN), E5M2 is IEEE-like (all-ones exponent: Inf/NaN), the FNUZ pair has no Inf and 0x80 as its one
NaN. argv: ckpt-flip binary, scratch dir."""
import json, os, struct, subprocess

import numpy as np

from ckpt_flip_pytest import FLIP, T, bits, fail, flip, read_safetensors, sha, write_safetensors

rng = np.random.default_rng(5)




def u8(n, lo=0, hi=256):
    return rng.integers(lo, hi, n, dtype=np.uint8).tobytes()


FLIPPABLE = {"F64": ("f64", 8), "F32": ("f32", 4), "F16": ("f16", 2), "BF16": ("bf16", 2), "F8_E4M3": ("f8_e4m3", 1),
             "F8_E5M2": ("f8_e5m2", 1), "F8_E8M0": ("f8_e8m0", 1), "F8_E4M3FNUZ": ("f8_e4m3fnuz", 1),
             "F8_E5M2FNUZ": ("f8_e5m2fnuz", 1), "I64": ("i64", 8), "I32": ("i32", 4), "I16": ("i16", 2),
             "I8": ("i8", 1), "U64": ("u64", 8), "U32": ("u32", 4), "U16": ("u16", 2), "U8": ("u8", 1), "BOOL": ("bool", 1)}
OPAQUE = {"F4": ([6, 4], 12), "F6_E2M3": ([8], 6), "F6_E3M2": ([4, 4], 12), "C64": ([3], 24)}  # shape, bytes
tensors = {f"t.{dt}": (dt, [12], u8(12 * size, 0, 2) if dt == "BOOL" else u8(12 * size, 0, 0xFF)) for dt, (_, size) in FLIPPABLE.items()}
tensors.update({f"t.{dt}": (dt, shape, u8(n)) for dt, (shape, n) in OPAQUE.items()})
path = f"{T}/all.safetensors"
write_safetensors(path, tensors)
original = sha(path)
head, base = read_safetensors(path)

info = json.loads(flip("inspect", path, "--json").stdout)
got = {d["dataset"]: (d["dtype"], d["flippable"]) for d in info["datasets"]}
want = {f"/t.{dt}": (name, True) for dt, (name, _) in FLIPPABLE.items()}
want.update({f"/t.{dt}": (f"{dt} (opaque)", False) for dt in OPAQUE})
if got != want:
    fail(f"inspect dtypes: {got}")
flippable_bits = 8 * sum(len(raw) for name, (dt, _, raw) in tensors.items() if dt in FLIPPABLE)
if int(info["total_bits"]) != flippable_bits or int(info["sampled_bits"]) != flippable_bits:
    fail(f"fault space {info['total_bits']} / sampled {info['sampled_bits']}: want the {flippable_bits} bits of the flippable tensors")

for mode in ("-o", "--in-place"):
    out = f"{T}/out.safetensors" if mode == "-o" else f"{T}/work.safetensors"
    if mode == "--in-place":
        open(out, "wb").write(open(path, "rb").read())
    flip("inject", path if mode == "-o" else out, *([mode, out] if mode == "-o" else [mode]), "--seed", "3", "--flips", "300", "--log", f"{T}/all.jsonl")
    h2, after = read_safetensors(out)
    if h2 != head:
        fail(f"{mode}: header bytes changed")
    n = sum(bits(base[k], after[k]) for k in base)
    if n != 300:
        fail(f"{mode}: {n} bits differ, expected 300")
    if any(bits(base[f"t.{dt}"], after[f"t.{dt}"]) for dt in OPAQUE):
        fail(f"{mode}: an opaque tensor changed")
    flip("revert", out, "--log", f"{T}/all.jsonl")
    if sha(out) != original:
        fail(f"{mode}: revert is not byte-identical")

# F8_E8M0: every bit is exponent. Its words read as 2^(e-127) (0xFF NaN); exponent flips hit any of
# the 8 bits; sign and mantissa select nothing.
e8 = f"{T}/e8.safetensors"
codes = np.array([0x7F, 0x80, 0x00, 0xFE, 0x01, 0xFD, 0xFB, 0xF7, 0xEF, 0xDF, 0xBF, 0x7F] * 8, np.uint8)
write_safetensors(e8, {"scale": ("F8_E8M0", [codes.size], codes.tobytes()), "w": ("F32", [4], np.ones(4, "<f4").tobytes())})
scan = json.loads(subprocess.run([FLIP, "scan", e8, "--json"], capture_output=True, text=True).stdout)  # exit 10: the scales span 2^-127..2^127
s = {d["dataset"]: d for d in scan["datasets"]}["/scale"]
if s["max_abs"] != 2.0 ** (0xFE - 127) or s["nan"] != 0 or s["inf"] != 0:
    fail(f"scan of E8M0 scales: {s}")
for field in ("sign", "mantissa"):
    p = flip("inject", e8, "-o", f"{T}/e8-{field}.safetensors", "--seed", "1", "--flips", "1", "--bits", field, "--include", "/scale",
             "--log", f"{T}/e8-{field}.jsonl", rc=5)
    if f"--bits {field} selects no bit" not in p.stderr:
        fail(f"E8M0 --bits {field}: the error does not name --bits: {p.stderr!r}")
flip("inject", e8, "-o", f"{T}/e8-exp.safetensors", "--seed", "2", "--flips", "60", "--bits", "exponent", "--include", "/scale",
     "--log", f"{T}/e8-exp.jsonl")
recs = [r for r in map(json.loads, open(f"{T}/e8-exp.jsonl")) if r["type"] == "flip"]
if len(recs) != 60 or any(r["dtype"] != "f8_e8m0" for r in recs) or len({int(r["mask"], 16) for r in recs}) < 6:
    fail(f"E8M0 exponent flips: {recs[:3]}")
if bits(read_safetensors(e8)[1]["scale"], read_safetensors(f"{T}/e8-exp.safetensors")[1]["scale"]) != 60:
    fail("E8M0: not 60 bits")

# --finite per format: no flip may leave a NaN or Inf by that format's rules. Words one bit away from
# the non-finite codes, so that unfiltered flips would make many.
cases = {"F8_E8M0": ([0xFE, 0xFD, 0xFB, 0xF7, 0xEF, 0xDF, 0xBF, 0x7F], lambda b: b == 0xFF),
         "F8_E4M3": ([0x7E, 0x7D, 0x7B, 0x77, 0x6F, 0x5F, 0x3F, 0xFE, 0xFD], lambda b: (b & 0x7F) == 0x7F),
         "F8_E5M2": ([0x78, 0x74, 0x6C, 0x5C, 0x3C, 0xF8, 0xF4, 0xEC], lambda b: (b & 0x7C) == 0x7C),
         "F8_E4M3FNUZ": ([0x00, 0x81, 0x82, 0x84, 0x88, 0x90, 0xA0, 0xC0], lambda b: b == 0x80),
         "F8_E5M2FNUZ": ([0x00, 0x81, 0x82, 0x84, 0x88, 0x90, 0xA0, 0xC0], lambda b: b == 0x80)}
for dt, (near, bad) in cases.items():
    f = f"{T}/finite-{dt}.safetensors"
    raw = np.array(near * 16, np.uint8)
    write_safetensors(f, {"x": (dt, [raw.size], raw.tobytes())})
    flip("inject", f, "-o", f"{T}/finite-out.safetensors", "--seed", "9", "--flips", "40", "--finite", "--log", f"{T}/finite.jsonl")
    after = read_safetensors(f"{T}/finite-out.safetensors")[1]["x"]
    if bits(raw, after) != 40 or any(bad(int(b)) for b in after):
        fail(f"{dt} --finite: {bits(raw, after)} bits, non-finite words {[hex(b) for b in after if bad(int(b))]}")
    flip("inject", f, "-o", f"{T}/any-out.safetensors", "--seed", "9", "--flips", "40", "--log", f"{T}/any.jsonl")
    if not any(bad(int(b)) for b in read_safetensors(f"{T}/any-out.safetensors")[1]["x"]):
        fail(f"{dt}: without --finite no flip made a non-finite word (the case does not test --finite)")
    os.remove(f"{T}/finite-out.safetensors")
    os.remove(f"{T}/any-out.safetensors")

# Packed sub-byte elements that do not fill whole bytes: one line naming the file, exit 4.
odd = f"{T}/odd.safetensors"
write_safetensors(odd, {"q": ("F4", [3], b"\x12\x34")})
p = flip("inspect", odd, rc=4)
if "do not fill whole bytes" not in p.stderr or odd not in p.stderr or len(p.stderr.strip().splitlines()) != 1:
    fail(f"F4 of 12 bits: {p.stderr!r}")
p = flip("inspect", path)
if "F4 (opaque)" not in p.stdout or "none (unsupported type)" not in p.stdout:
    fail(f"inspect text does not list the opaque tensors: {p.stdout}")
print("ok")
