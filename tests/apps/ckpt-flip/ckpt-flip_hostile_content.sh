#!/bin/bash
# What a checkpoint's content may not do to ckpt-flip: tensor names holding terminal escape
# sequences, a newline, NUL or C1 controls (torch.save, safetensors, HDF5) are printed escaped by
# inspect and inject --dry-run, one line per tensor, never raw; and a torch.save file whose tensor
# bytes hold HDF5's signature at offset 1024 (where a user block would end) is still torch.save,
# while an HDF5 file with a user block that starts like a zip is still HDF5.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-hostile-content
FLIP=$1
json() {  # json FILE PYTHON-EXPRESSION-OF-j : prints the value
  $PY -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}

$PY - "$T" <<'PY' || fail "could not write the checkpoints"
import io, json, struct, sys
import h5py, numpy as np, torch
d = sys.argv[1]
# ESC ] 0 ; ... BEL retitles a terminal window, ESC [ 31 m turns it red, the newline would add a
# listing line, NUL and U+0085 (C1 NEXT LINE) are controls too.
evil = "a\x1b]0;pwned\x07\x1b[31mred\nb\x00c\u0085d"
torch.save({"model": {evil: torch.ones(4), "plain": torch.zeros(2)}}, f"{d}/names.pt")
head = json.dumps({evil: {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                   "plain": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}}).encode()
head += b" " * (-len(head) % 8)
open(f"{d}/names.safetensors", "wb").write(struct.pack("<Q", len(head)) + head + bytes(24))
with h5py.File(f"{d}/names.h5", "w") as f:  # HDF5 link names cannot hold NUL
    f["model/" + evil.replace("\x00", "")] = np.ones(4, "f4")
    f["model/plain"] = np.zeros(2, "f4")

# A .pt whose one tensor's bytes hold HDF5's signature exactly at file offset 1024.
sig = b"\x89HDF\r\n\x1a\n"
def saved(w):
    b = io.BytesIO()
    torch.save({"model": {"w": w}}, b)
    return b.getvalue()
w = torch.zeros(1024)
data = saved(w).find(bytes(4096))  # the storage: the first run of its zero bytes
assert 0 < data <= 1024 - 8
raw = bytearray(4096)
raw[1024 - data:1024 - data + 8] = sig
pt = saved(torch.frombuffer(raw, dtype=torch.float32).clone())
assert pt[1024:1032] == sig and pt[:4] == b"PK\x03\x04"
open(f"{d}/sig.pt", "wb").write(pt)
# An HDF5 file with a 512-byte user block that starts like a zip archive: HDF5 all the same.
with h5py.File(f"{d}/ub.h5", "w", userblock_size=512) as f:
    f["model/w"] = np.arange(8, dtype="f4")
with open(f"{d}/ub.h5", "r+b") as fh:
    fh.write(b"PK\x03\x04" + b"u" * 60)
PY

# clean FILE: no control character in FILE but the newlines that end its lines.
clean() {
  $PY - "$1" <<'PY'
import re, sys
data = open(sys.argv[1], "rb").read()
bad = re.search(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]", data)
if bad:
    sys.exit(f"control byte {bad.group()!r} at {bad.start()}: {data[max(0, bad.start() - 40):bad.start() + 40]!r}")
PY
}
for f in names.pt names.safetensors names.h5; do
  run "$FLIP" inspect "$T/$f"
  clean "$T/stdout" || fail "$f: inspect prints a name raw: $(cat -v "$T/stdout")"
  grep -qF 'a\x1b]0;pwned\x07\x1b[31mred\x0ab' "$T/stdout" || fail "$f: inspect does not show the name escaped: $(cat -v "$T/stdout")"
  [ "$(grep -c ' f32\[' "$T/stdout")" = 2 ] && [ "$(wc -l < "$T/stdout")" = "$(grep -c . "$T/stdout")" ] || fail "$f: not one line per tensor: $(cat -v "$T/stdout")"
  run "$FLIP" inject "$T/$f" --dry-run --flips 40 --seed 3 --include '*red*'
  clean "$T/stdout" || fail "$f: inject --dry-run prints a name raw: $(cat -v "$T/stdout")"
  [ "$(grep -c 'pwned' "$T/stdout")" = 40 ] || fail "$f: expected 40 planned flips, one line each: $(cat -v "$T/stdout")"
done

# Text from the file other than tensor names is bytes too: external raw file names, a
# resil_tp_slice attribute, a shard's file name. Not UTF-8 (0xFF) it is escaped and flagged in
# --json (external_escaped, tp_slice_escaped, location's file_escaped), never an internal error;
# with terminal escapes it is printed escaped. Aliases carry aliases_escaped: a name with byte 0xFF
# and a UTF-8 name spelled with a literal backslash-x-f-f are told apart.
mkdir -p "$T/text" "$T/shd"
$PY - "$T" <<'PY' || fail "could not write the text checkpoints"
import os, struct, sys
import h5py, numpy as np
d = sys.argv[1]
os.chdir(f"{d}/text")
with h5py.File("text.h5", "w") as f:
    f.create_dataset("x", shape=(4,), dtype="f4", external=[(b"raw\xff.bin", 0, 16)])
    f.create_dataset("y", shape=(4,), dtype="f4", external=[("\x1b]0;pwned\x07raw.bin", 0, 16)])
    f.create_dataset("model/u", data=np.ones(4, "f4")).attrs["resil_tp_slice"] = np.bytes_(b'{"dim":0,"x":"\xff"}')
    f.create_dataset("model/v", data=np.ones(4, "f4")).attrs["resil_tp_slice"] = "\x1b[2Jnot json"
    f["w"] = np.ones(2, "f4")
    f[b"b\xff"] = f["w"]   # the byte 0xFF
    f["b\\xff"] = f["w"]   # a backslash, x, f, f
for name in (b"raw\xff.bin", "\x1b]0;pwned\x07raw.bin".encode()):
    open(name, "wb").write(bytes(16))
head = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
head += b" " * (-len(head) % 8)
open(f"{d}/shd/m\x1b[2J-1.safetensors".encode(), "wb").write(struct.pack("<Q", len(head)) + head + bytes(8))
head = head.replace(b'"a"', b'"b"')
open(f"{d}/shd/".encode() + b"m\xff-2.safetensors", "wb").write(struct.pack("<Q", len(head)) + head + bytes(8))
PY
run "$FLIP" inspect "$T/text/text.h5" --json
cp "$T/stdout" "$T/text.json"
$PY - "$T/text.json" <<'PY' || fail "inspect --json of text.h5: $(cat "$T/text.json")"
import json, re, sys
ds = {d["dataset"]: d for d in json.load(open(sys.argv[1]))["datasets"]}
def check(what, got, want):
    if got != want: sys.exit(f"{what}: {got!r}, want {want!r}")
check("x external", (ds["/x"]["external"], ds["/x"].get("external_escaped")), (["raw\\xff.bin"], True))
check("y external", (ds["/y"]["external"], ds["/y"].get("external_escaped")), (["\x1b]0;pwned\x07raw.bin"], None))
check("u tp_slice", (ds["/model/u"]["tp_slice"], ds["/model/u"].get("tp_slice_escaped")), ('{"dim":0,"x":"\\xff"}', True))
check("v tp_slice", (ds["/model/v"]["tp_slice"], ds["/model/v"].get("tp_slice_escaped")), ("\x1b[2Jnot json", None))
owner = [d for d in ds.values() if "aliases" in d]
check("one tensor with aliases", len(owner), 1)
o = owner[0]
def raw(text, flagged):  # the name's bytes (docs/reference/flip-log.md: \\ and \xHH when flagged)
    if not flagged: return text.encode()
    return re.sub(rb"\\(\\|x([0-9a-f]{2}))", lambda m: bytes([int(m[2], 16)]) if m[2] else b"\\", text.encode())
names = [raw(o["dataset"], o.get("dataset_escaped"))] + [raw(a, o.get("aliases_escaped")) for a in o["aliases"]]
check("the names of /w, as bytes", sorted(names), sorted([b"/w", b"/b\xff", b"/b\\xff"]))
PY
run "$FLIP" inspect "$T/text/text.h5"
clean "$T/stdout" || fail "inspect prints text from the file raw: $(cat -v "$T/stdout")"
for want in 'external raw\xff.bin ' 'external \x1b]0;pwned\x07raw.bin ' 'tp slice {"dim":0,"x":"\xff"}' 'tp slice \x1b[2Jnot json'; do
  grep -qF "$want" "$T/stdout" || fail "inspect does not show '$want': $(cat -v "$T/stdout")"
done
run "$FLIP" inspect "$T/shd"
clean "$T/stdout" || fail "inspect of a shard set prints a file name raw: $(cat -v "$T/stdout")"
grep -qF 'in m\x1b[2J-1.safetensors ' "$T/stdout" && grep -qF 'in m\xff-2.safetensors ' "$T/stdout" ||
  fail "inspect does not show the shard file names escaped: $(cat -v "$T/stdout")"
run "$FLIP" inspect "$T/shd" --json
cp "$T/stdout" "$T/shd.json"
[ "$(json "$T/shd.json" "sorted((d['dataset'], d['location']) for d in j['datasets'])")" = \
  "[('/a', {'file': 'm\\x1b[2J-1.safetensors'}), ('/b', {'file': 'm\\\\xff-2.safetensors', 'file_escaped': True})]" ] ||
  fail "inspect --json shard locations: $(cat "$T/shd.json")"

# scan --json's list of skipped datasets ("PATH (why)") is escaped and flagged as names are.
$PY - "$T/text/skip.h5" <<'PY' || fail "could not write skip.h5"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["w"] = np.ones(2, "f4")
    f[b"s\xff"] = np.array([b"abc"])   # fixed-length strings: skipped by scan
PY
run "$FLIP" scan "$T/text/skip.h5" --json
[ "$(json "$T/stdout" "(j['skipped'], j.get('skipped_escaped'))")" = "(['/s\\\\xff (string)'], True)" ] ||
  fail "scan --json skipped list: $(cat "$T/stdout")"

# A DCP .metadata naming a chunk's file with bytes that are not UTF-8: the flip log's and inspect's
# location carry the file escaped and flagged, never an internal error.
$PY - "$T/dcp" "$(dirname "$0")" <<'PY' || fail "could not write the DCP checkpoint"
import os, sys
sys.path.insert(0, sys.argv[2])
import make_dcp_fixtures as fx
d = sys.argv[1]
fx.write(d)
p = os.path.join(d, ".metadata")
b = open(p, "rb").read()
old, new = b"__1_0.distcp", b"__1\xed\xb3\xbf_0.distcp"   # a lone surrogate as pickle writes it
i = b.index(old)
assert b[i - 2] == 0x8c and b[i - 1] == len(old)       # SHORT_BINUNICODE, memoised: its one occurrence
open(p, "wb").write(b[:i - 1] + bytes([len(new)]) + new + b[i + len(old):])
os.rename(os.path.join(d, "__1_0.distcp").encode(), d.encode() + b"/" + new)
PY
run "$FLIP" inject "$T/dcp" -o "$T/dcp-out" --flips 200 --seed 3 --log "$T/dcp.jsonl"
grep -qF '"file":"__1\\xed\\xb3\\xbf_0.distcp","file_escaped":true' "$T/dcp.jsonl" ||
  fail "flip log of a non-UTF-8 DCP file name: $(grep -m1 distcp "$T/dcp.jsonl")"
run "$FLIP" inspect "$T/dcp" --json
run "$FLIP" revert "$T/dcp-out" --log "$T/dcp.jsonl"

# Detection is not decided by a tensor's bytes.
run "$FLIP" inspect "$T/sig.pt"
grep -q "^format: torch" "$T/stdout" || fail "sig.pt (HDF5's signature inside a tensor) is not torch.save: $(cat "$T/stdout")"
sum=$(sha "$T/sig.pt")
run "$FLIP" inject "$T/sig.pt" --in-place --log "$T/sig.jsonl" --flips 5 --seed 1
run "$FLIP" revert "$T/sig.pt" --log "$T/sig.jsonl"
[ "$(sha "$T/sig.pt")" = "$sum" ] || fail "sig.pt: inject and revert did not give the file back"
run "$FLIP" inspect "$T/ub.h5"
grep -q "^format: hdf5" "$T/stdout" || fail "ub.h5 (a user block that starts like a zip) is not HDF5: $(cat "$T/stdout")"
echo PASS
