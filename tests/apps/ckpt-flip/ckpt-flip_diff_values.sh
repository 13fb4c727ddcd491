#!/bin/bash
# ckpt-flip diff says "identical" only when every tensor was compared and is the same, and compares
# what the files' own readers give:
# - a dtype ckpt-flip does not interpret (safetensors F4/C64, HDF5 fixed strings, compounds) is
#   compared by its stored bytes: other bytes differ (before: "identical"), equal bytes are the same;
# - F32 in A and C64 in B is a dtype mismatch (before: "identical");
# - HDF5 variable-length strings are compared as their text;
# - torch.save views are compared as torch.load gives them, at their offset and strides: base[0:4]
#   vs base[4:8] differs (before: "identical", the storages are equal), a transposed view vs a
#   contiguous tensor of the same shape differs where torch.load's values do;
# - -0.0 vs 0.0 differs in bits with max rel err 0, not inf (a zero reference);
# - 64-bit integers one apart read abs err 1; a Fortran-ordered array is compared as numpy.load gives it;
# - between files of one format, HDF5 soft/external links and attributes, a torch.save file's
#   pickled object (an epoch, a shared or cloned storage), safetensors' __metadata__ and a DCP
#   checkpoint's non-tensor values are compared too (before: "identical").
# Each verdict is checked against numpy, h5py or torch.load.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-diff-values
FLIP=$1
$PY - "$T" <<'PYEOF' || fail "could not write the inputs"
import sys, json, struct, numpy as np, h5py
T = sys.argv[1]
def st(path, tensors):  # safetensors: [(name, dtype tag, shape, bytes)]
    hdr, off, blob = {}, 0, b""
    for name, dt, shape, data in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data); blob += data
    h = json.dumps(hdr).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + blob)
st(f"{T}/o1.st", [("q", "F4", [8], bytes([1, 2, 3, 4]))])
st(f"{T}/o2.st", [("q", "F4", [8], bytes([9, 9, 9, 9]))])
st(f"{T}/o3.st", [("q", "F4", [8], bytes([1, 2, 3, 4]))])
st(f"{T}/c1.st", [("q", "F32", [2], np.array([1, 2], "<f4").tobytes())])
st(f"{T}/c2.st", [("q", "C64", [1], np.array([1, 2], "<f4").tobytes())])
st(f"{T}/k1.st", [("q", "C64", [3], np.arange(6, dtype="<f4").tobytes())])
k = np.arange(6, dtype="<f4"); k[3] = 9
st(f"{T}/k2.st", [("q", "C64", [3], k.tobytes())])
st(f"{T}/z1.st", [("w", "F32", [2], np.array([0.0, 1.0], "<f4").tobytes())])
st(f"{T}/z2.st", [("w", "F32", [2], np.array([-0.0, 1.0], "<f4").tobytes())])
for name, s, v, c in (("h1", [b"ab", b"xy"], ["ab"], (1.0, 2)), ("h2", [b"cd", b"xy"], ["cd"], (1.0, 2)),
                      ("h3", [b"ab", b"xy"], ["ab"], (1.0, 2))):
    with h5py.File(f"{T}/{name}.h5", "w") as f:
        f["model/s"] = np.array(s, dtype="S2")
        f["model/c"] = np.array([c], dtype=[("a", "f4"), ("b", "i8")])
        f["model/w"] = np.ones(3, np.float32)
    with h5py.File(f"{T}/{name}v.h5", "w") as f:
        f.create_dataset("model/v", data=v, dtype=h5py.string_dtype())
        f["model/w"] = np.ones(3, np.float32)
PYEOF
json() { $PY -c "import json,sys; j=json.load(open(sys.argv[1])); d={x['dataset']: x for x in j['datasets']}; r=($2); print(r)" "$1"; }

# Opaque F4: other bytes differ (no count for packed 4-bit elements), equal bytes are the same.
expect_rc 0 "$FLIP" diff "$T/o1.st" "$T/o2.st" --json
[ "$(json "$T/stdout" "j['identical'], d['/q']['status'], d['/q']['compared'], d['/q']['differing']")" = "(False, 'differ', 'bytes', None)" ] \
  || fail "F4 with other bytes: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/o1.st" "$T/o2.st"
grep -q "^/q  differ  stored bytes differ (F4 (opaque))" "$T/stdout" && grep -q "^1 of 1 dataset(s) differ" "$T/stdout" || fail "F4 text: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/o1.st" "$T/o3.st" --json
[ "$(json "$T/stdout" "j['identical'], d['/q']['status'], d['/q']['compared']")" = "(True, 'same', 'bytes')" ] || fail "F4 with equal bytes: $(cat "$T/stdout")"
# C64 (whole 8-byte elements): the differing elements are counted, as numpy sees them.
want=$($PY -c "
import numpy as np, sys
a = np.arange(6, dtype='<f4').view('<c8'); b = a.copy().view('<f4'); b[3] = 9; print(int((a != b.view('<c8')).sum()))")
expect_rc 0 "$FLIP" diff "$T/k1.st" "$T/k2.st" --json
[ "$(json "$T/stdout" "d['/q']['status'], d['/q']['differing']")" = "('differ', $want)" ] || fail "C64 count (numpy: $want): $(cat "$T/stdout")"
# F32 in A, C64 in B (same bytes): a dtype mismatch, a difference.
expect_rc 0 "$FLIP" diff "$T/c1.st" "$T/c2.st" --json
[ "$(json "$T/stdout" "j['identical'], d['/q']['status']")" = "(False, 'dtype-mismatch')" ] || fail "F32 vs C64: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/c1.st" "$T/c2.st"
grep -q "identical" "$T/stdout" && fail "F32 vs C64 text says identical: $(cat "$T/stdout")"

# HDF5 fixed strings and compounds by stored bytes; h5py agrees on which differ.
expect_rc 0 "$FLIP" diff "$T/h1.h5" "$T/h2.h5" --json
[ "$(json "$T/stdout" "j['identical'], d['/model/s']['status'], d['/model/s']['differing'], d['/model/c']['status'], d['/model/w']['status']")" \
  = "(False, 'differ', 1, 'same', 'same')" ] || fail "HDF5 strings: $(cat "$T/stdout")"
$PY - "$T" <<'PYEOF' || fail "h5py disagrees"
import sys, h5py
T = sys.argv[1]
with h5py.File(f"{T}/h1.h5") as a, h5py.File(f"{T}/h2.h5") as b:
    assert (a["model/s"][()] != b["model/s"][()]).sum() == 1 and (a["model/c"][()] == b["model/c"][()]).all()
PYEOF
expect_rc 0 "$FLIP" diff "$T/h1.h5" "$T/h3.h5" --json
[ "$(json "$T/stdout" "j['identical'], sorted(x['status'] for x in j['datasets'])")" = "(True, ['same', 'same', 'same'])" ] \
  || fail "HDF5 equal strings and compounds: $(cat "$T/stdout")"
# Variable-length strings: compared as their text (before: not compared, so never "identical"):
# other strings differ, equal strings are the same, as h5py reads them.
expect_rc 0 "$FLIP" diff "$T/h1v.h5" "$T/h2v.h5" --json
[ "$(json "$T/stdout" "j['identical'], d['/model/v']['status'], d['/model/v']['compared'], d['/model/v']['differing']")" = "(False, 'differ', 'text', None)" ] \
  || fail "vlen strings h1v h2v: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/h1v.h5" "$T/h2v.h5"
grep -q "^/model/v  differ  values differ (string)" "$T/stdout" && grep -q "^1 of 2 dataset(s) differ" "$T/stdout" \
  || fail "vlen strings text: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/h1v.h5" "$T/h3v.h5" --json
[ "$(json "$T/stdout" "j['identical'], d['/model/v']['status'], d['/model/v']['compared']")" = "(True, 'same', 'text')" ] \
  || fail "equal vlen strings: $(cat "$T/stdout")"
$PY - "$T" <<'PYEOF' || fail "h5py disagrees on the vlen strings"
import sys, h5py
T = sys.argv[1]
with h5py.File(f"{T}/h1v.h5") as a, h5py.File(f"{T}/h2v.h5") as b, h5py.File(f"{T}/h3v.h5") as c:
    assert list(a["model/v"][()]) != list(b["model/v"][()]) and list(a["model/v"][()]) == list(c["model/v"][()])
PYEOF

# -0.0 vs 0.0: one element differs (bit 31), abs err 0, rel err 0 (zero reference, zero difference).
expect_rc 0 "$FLIP" diff "$T/z1.st" "$T/z2.st" --json
[ "$(json "$T/stdout" "d['/w']['differing'], d['/w']['bit_histogram'], d['/w']['max_abs_error'], d['/w']['max_rel_error']")" \
  = "(1, {'31': 1}, 0.0, 0.0)" ] || fail "-0.0 vs 0.0: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/z1.st" "$T/z2.st"
grep -q "max abs err 0  max rel err 0 " "$T/stdout" || fail "-0.0 vs 0.0 text: $(cat "$T/stdout")"

# 64-bit integers one apart near 2^60 and 2^64: abs err 1, as numpy's exact difference (in doubles
# both sides round to one value and the error read 0).
$PY - "$T" <<'PY' || fail "could not write the integer files"
import sys, numpy as np
np.savez(f"{sys.argv[1]}/i1.npz", i=np.array([2**60], "i8"), u=np.array([2**64 - 1], "u8"), n=np.array([-2**63], "i8"))
np.savez(f"{sys.argv[1]}/i2.npz", i=np.array([2**60 + 1], "i8"), u=np.array([2**64 - 2], "u8"), n=np.array([2**63 - 1], "i8"))
PY
expect_rc 0 "$FLIP" diff "$T/i1.npz" "$T/i2.npz" --json
[ "$(json "$T/stdout" "[(d[k]['differing'], d[k]['max_abs_error']) for k in ('/i', '/u', '/n')]")" \
  = "[(1, 1.0), (1, 1.0), (1, 1.8446744073709552e+19)]" ] || fail "64-bit integer errors: $(cat "$T/stdout")"

# A Fortran-ordered .npy/.npz array is compared as numpy.load gives it: equal to the same values in
# C order and in HDF5 (before: shape-mismatch against its transpose), its differing element found.
$PY - "$T" <<'PY' || fail "could not write the Fortran-order files"
import sys, h5py, numpy as np
d = sys.argv[1]
a = np.arange(15, dtype="f4").reshape(3, 5)
b = np.asfortranarray(a.copy()); b[1, 2] = -1
np.save(f"{d}/c.npy", a); np.save(f"{d}/f.npy", np.asfortranarray(a)); np.save(f"{d}/fb.npy", b)
np.savez(f"{d}/f.npz", array=np.asfortranarray(a))
with h5py.File(f"{d}/c.h5", "w") as f:
    f["array"] = a
PY
for pair in "c.npy f.npy" "f.npy c.npy" "c.h5 f.npy" "f.npz c.h5"; do
  set -- $pair
  expect_rc 0 "$FLIP" diff "$T/$1" "$T/$2" --json
  [ "$(json "$T/stdout" "j['identical'], d['/array']['status']")" = "(True, 'same')" ] || fail "Fortran order, $pair: $(cat "$T/stdout")"
done
expect_rc 0 "$FLIP" diff "$T/c.npy" "$T/fb.npy" --json
[ "$(json "$T/stdout" "d['/array']['differing'], d['/array']['max_abs_error']")" = "(1, 8.0)" ] || fail "Fortran order, b[1, 2] = -1: $(cat "$T/stdout")"

# What a reader gets besides tensors, between files of one format: an HDF5 soft link leading to
# another dataset, an external link to another file, a torch.save file's non-tensor values (before:
# "identical", though h5py and torch.load give other data). The same content is not a difference.
$PY - "$T" <<'PY' || fail "could not write the link and pickle files"
import sys, h5py, numpy as np, torch
d = sys.argv[1]
for name, target, ext in (("la", "/w", "x.h5"), ("lb", "/x", "y.h5"), ("lc", "/w", "x.h5")):
    with h5py.File(f"{d}/{name}.h5", "w") as f:
        f["w"] = np.ones(3, "f4"); f["x"] = np.zeros(3, "f4")
        f["v"] = h5py.SoftLink(target)
        f["e"] = h5py.ExternalLink(ext, "/w")
t = torch.arange(4, dtype=torch.float32)
torch.save({"w": t, "epoch": 5, "a": np.array([1, 2])}, f"{d}/pa.pt")
torch.save({"w": t, "epoch": 6, "a": np.array([1, 2])}, f"{d}/pb.pt")
torch.save({"w": t, "epoch": 5, "a": np.array([1, 2])}, f"{d}/pc.pt")
PY
expect_rc 0 "$FLIP" diff "$T/la.h5" "$T/lb.h5" --json
[ "$(json "$T/stdout" "j['identical'], [(o['name'], o['status'], o['a'], o['b']) for o in j['other']]")" = \
  "(False, [('/e', 'differ', 'external link to x.h5:/w', 'external link to y.h5:/w'), ('/v', 'differ', 'soft link to /w', 'soft link to /x')])" ] ||
  fail "HDF5 links: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/la.h5" "$T/lb.h5"
grep -q "^/v  differ  A: soft link to /w; B: soft link to /x$" "$T/stdout" && grep -q "2 other item(s) differ" "$T/stdout" &&
  ! grep -q identical "$T/stdout" || fail "HDF5 links, text: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/la.h5" "$T/lc.h5" --json
[ "$(json "$T/stdout" "j['identical'], j['other']")" = "(True, [])" ] || fail "HDF5, same links: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/pa.pt" "$T/pb.pt" --json
[ "$(json "$T/stdout" "j['identical'], [(o['name'], o['status']) for o in j['other']], d['/w']['status']")" = "(False, [('pickle', 'differ')], 'same')" ] ||
  fail "torch.save epoch 5 vs 6: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/pa.pt" "$T/pc.pt" --json
[ "$(json "$T/stdout" "j['identical']")" = True ] || fail "torch.save, same content: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/la.h5" "$T/pa.pt" --json   # other formats: only tensors are compared
[ "$(json "$T/stdout" "j['other']")" = "[]" ] || fail "HDF5 vs torch: $(cat "$T/stdout")"

# Attributes of every HDF5 object, safetensors' __metadata__ (also in each shard of a set) and a
# DCP checkpoint's non-tensor values are compared too (before: "identical" beside other epochs,
# units or optimizer settings). Which differ is checked against h5py; an attribute ckpt-flip does
# not render (a variable-length sequence) is "not compared", never the same.
$PY - "$T" <<'PY' || fail "could not write the attribute and metadata files"
import sys, json, struct, os, h5py, numpy as np
d = sys.argv[1]
for name, unit, epoch, big, target in (("aa", "m/s", 3, 0, "w"), ("ab", "km/h", 4, 1, "x"), ("ac", "m/s", 3, 0, "w")):
    with h5py.File(f"{d}/{name}.h5", "w") as f:
        f["w"] = np.ones(3, "f4"); f["x"] = np.zeros(3, "f4")
        f["w"].attrs["units"] = unit
        f.attrs["epoch"] = np.int64(epoch)
        f.attrs["lr"] = np.float32(0.1)
        f.attrs["names"] = np.array([b"w", b"x"])
        f.create_group("g").attrs["big"] = np.arange(1000, dtype="f8") + big
        f.attrs["ref"] = f[target].ref
with h5py.File(f"{d}/av.h5", "w") as f:
    f["w"] = np.ones(3, "f4")
    seq = np.empty(1, dtype=object); seq[0] = np.array([1, 2], "i4")
    f.attrs.create("seq", data=seq, dtype=h5py.vlen_dtype("i4"))
def st(path, meta):
    data = np.ones(2, "<f4").tobytes()
    hdr = {"__metadata__": meta, "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, len(data)]}}
    h = json.dumps(hdr).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
st(f"{d}/ma.st", {"format": "pt", "step": "100"}); st(f"{d}/mb.st", {"format": "np", "step": "100"}); st(f"{d}/mc.st", {"format": "pt", "step": "100"})
for name, fmt in (("sa", "pt"), ("sb", "np")):
    os.makedirs(f"{d}/{name}")
    st(f"{d}/{name}/model-00001-of-00002.safetensors", {"format": "pt"})
    data = np.zeros(2, "<f4").tobytes()
    h = json.dumps({"__metadata__": {"format": fmt}, "v": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    open(f"{d}/{name}/model-00002-of-00002.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
    json.dump({"metadata": {"total_size": 16}, "weight_map": {"w": "model-00001-of-00002.safetensors", "v": "model-00002-of-00002.safetensors"}},
              open(f"{d}/{name}/model.safetensors.index.json", "w"))
# Which attributes differ, as h5py reads them (an object reference: the path it leads to).
def attrs(path):
    out = {}
    with h5py.File(path) as f:
        def walk(name, obj):
            for k, v in obj.attrs.items():
                out[("/" + name if name else "") + "@" + k] = f[v].name if isinstance(v, h5py.Reference) else np.asarray(v).tolist()
        walk("", f)
        f.visititems(walk)
    return out
a, b = attrs(f"{d}/aa.h5"), attrs(f"{d}/ab.h5")
print(sorted(k.replace("/@", "@", 1) if k.startswith("/@") else k for k in a if a[k] != b[k]), file=open(f"{d}/h5py_attrs", "w"))
PY
expect_rc 0 "$FLIP" diff "$T/aa.h5" "$T/ab.h5" --json
got=$(json "$T/stdout" "sorted(o['name'] for o in j['other'] if o['status'] == 'differ')")
want=$($PY -c "import ast,sys; print(sorted(('/' + k if k.startswith('@') else k) for k in ast.literal_eval(open(sys.argv[1]).read())))" "$T/h5py_attrs")
[ "$got" = "$want" ] && [ "$got" = "['/@epoch', '/@ref', '/g@big', '/w@units']" ] || fail "HDF5 attributes: $got, h5py: $want"
[ "$(json "$T/stdout" "j['identical'], {o['name']: (o['a'], o['b']) for o in j['other']}['/@epoch']")" = "(False, ('int64 3', 'int64 4'))" ] ||
  fail "HDF5 attribute values: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/aa.h5" "$T/ab.h5"
grep -q '^/w@units  differ  A: vstring "m/s"; B: vstring "km/h"$' "$T/stdout" && grep -q '^/@ref  differ  A: reference ref"/w"; B: reference ref"/x"$' "$T/stdout" &&
  grep -q "4 other item(s) differ" "$T/stdout" || fail "HDF5 attributes, text: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/aa.h5" "$T/ac.h5" --json
[ "$(json "$T/stdout" "j['identical'], j['other']")" = "(True, [])" ] || fail "HDF5, same attributes: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/av.h5" "$T/av.h5" --json
[ "$(json "$T/stdout" "j['identical'], [(o['name'], o['status']) for o in j['other']]")" = "(False, [('/@seq', 'unsupported')])" ] ||
  fail "HDF5 vlen sequence attribute: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/av.h5" "$T/av.h5"
grep -q "^/@seq  not compared" "$T/stdout" && grep -q "1 other item(s) not compared" "$T/stdout" && ! grep -q identical "$T/stdout" ||
  fail "HDF5 vlen sequence attribute, text: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/ma.st" "$T/mb.st" --json
[ "$(json "$T/stdout" "j['identical'], [(o['name'], o['status'], o['a'], o['b']) for o in j['other']]")" = \
  "(False, [('__metadata__/format', 'differ', '\"pt\"', '\"np\"')])" ] || fail "safetensors __metadata__: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/ma.st" "$T/mc.st" --json
[ "$(json "$T/stdout" "j['identical']")" = True ] || fail "safetensors, same __metadata__: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/sa" "$T/sb" --json
[ "$(json "$T/stdout" "j['identical'], [(o['name'], o['status']) for o in j['other']]")" = \
  "(False, [('model-00002-of-00002.safetensors:__metadata__/format', 'differ')])" ] || fail "shard set __metadata__: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/sa" "$T/sa" --json
[ "$(json "$T/stdout" "j['identical']")" = True ] || fail "shard set, same: $(cat "$T/stdout")"
# Names that read alike are still told apart: attribute "b@c" of /a and attribute "c" of dataset /a@b;
# attribute "u" of /a and a dataset named /a@u; a string dataset /a@u and attribute "u" of /a (before:
# one of each pair hid the other, and a difference in it read "identical"). Types that read
# differently never render alike: enums by their names, compounds by their fields, wide integers whole.
$PY - "$T" <<'PY' || fail "could not write the name and type files"
import sys, h5py, numpy as np
d = sys.argv[1]
for n, v in (("n1", 2), ("n2", 3)):
    with h5py.File(f"{d}/{n}.h5", "w") as f:
        f["a"] = np.ones(2, "f4"); f["a"].attrs["b@c"] = 1
        f["a@b"] = np.ones(2, "f4"); f["a@b"].attrs["c"] = v
        f["a"].attrs["u"] = v; f["a@u"] = np.ones(2, "f4")
        f.create_dataset("s", data=["x", "y" if v == 2 else "z"], dtype=h5py.string_dtype()); f["s"].attrs["k"] = 1
        f.create_dataset("s@k", data=["same"], dtype=h5py.string_dtype())
for n, names, field in (("e1", {"RED": 0, "GREEN": 1}, "r"), ("e2", {"OFF": 0, "ON": 1}, "i")):
    with h5py.File(f"{d}/{n}.h5", "w") as f:
        f["w"] = np.ones(2, "f4")
        f["w"].attrs.create("e", 1, dtype=h5py.enum_dtype(names, basetype="u1"))
        f["w"].attrs["c"] = np.array([(1.0, 2.0)], dtype=[(field, "<f4"), ("z", "<f4")])
PY
expect_rc 0 "$FLIP" diff "$T/n1.h5" "$T/n2.h5" --json
[ "$(json "$T/stdout" "sorted((o['name'], o.get('object'), o.get('attribute'), o['status']) for o in j['other']), d['/s']['status']")" = \
  "([('/a@b@c', '/a@b', 'c', 'differ'), ('/a@u', '/a', 'u', 'differ')], 'differ')" ] || fail "names that read alike: $(cat "$T/stdout")"
# NaN attributes with other payloads differ (as in tensors); a never-written string (NULL) and "" are the
# same, as h5py reads both; a safetensors set and a torch.save set of the same tensors are identical
# (their shards' own items, __metadata__ and pickles, are of two formats: not compared).
$PY - "$T" <<'PY' || fail "could not write the NaN, NULL and two-format files"
import sys, os, json, struct, h5py, numpy as np, torch
d = sys.argv[1]
for n, bits in (("q1", 0x7fc00001), ("q2", 0x7fc00002)):
    with h5py.File(f"{d}/{n}.h5", "w") as f:
        f["w"] = np.ones(2, "f4"); f["w"].attrs["nan"] = np.array([bits], "<u4").view("<f4")[0]
with h5py.File(f"{d}/z1.h5", "w") as f:
    f.create_dataset("s", shape=(2,), dtype=h5py.string_dtype())
with h5py.File(f"{d}/z2.h5", "w") as f:
    f.create_dataset("s", data=["", ""], dtype=h5py.string_dtype())
w = {"a": np.arange(4, dtype="<f4"), "b": np.ones(3, "<f4")}
os.makedirs(f"{d}/fs"); os.makedirs(f"{d}/fp")
for i, k in enumerate(("a", "b")):
    h = json.dumps({"__metadata__": {"format": "pt"}, k: {"dtype": "F32", "shape": list(w[k].shape), "data_offsets": [0, w[k].nbytes]}}).encode()
    open(f"{d}/fs/model-0000{i + 1}-of-00002.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + w[k].tobytes())
    torch.save({k: torch.from_numpy(w[k])}, f"{d}/fp/pytorch_model-0000{i + 1}-of-00002.bin")
json.dump({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}},
          open(f"{d}/fs/model.safetensors.index.json", "w"))
json.dump({"metadata": {}, "weight_map": {"a": "pytorch_model-00001-of-00002.bin", "b": "pytorch_model-00002-of-00002.bin"}},
          open(f"{d}/fp/pytorch_model.bin.index.json", "w"))
PY
expect_rc 0 "$FLIP" diff "$T/q1.h5" "$T/q2.h5" --json
[ "$(json "$T/stdout" "[(o['name'], o['status']) for o in j['other']]")" = "[('/w@nan', 'differ')]" ] || fail "NaN payloads: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/z1.h5" "$T/z2.h5" --json
[ "$(json "$T/stdout" "j['identical'], d['/s']['compared']")" = "(True, 'text')" ] || fail "NULL strings vs empty ones: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/fs" "$T/fp" --json
[ "$(json "$T/stdout" "j['identical'], j['other']")" = "(True, [])" ] || fail "a safetensors set vs a torch.save set: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/e1.h5" "$T/e2.h5" --json
[ "$(json "$T/stdout" "sorted((o['name'], o['status']) for o in j['other'])")" = "[('/w@c', 'differ'), ('/w@e', 'differ')]" ] ||
  fail "enum names and compound fields: $(cat "$T/stdout")"
# Damaged attribute messages: HDF5 1.10 crashes on some (a signal inside H5O_sdspace_shared_decode)
# and allocates what a damaged string length says (gigabytes from a 6 KB file). Every byte of the
# message and its neighbours set to 0xff, then to 0x00: diff exits 0 within seconds, in bounded memory,
# and an attribute it could not read is "not compared", never the same.
$PY - "$T" "$FLIP" <<'PY' || fail "damaged attribute messages"
import sys, subprocess, json, h5py, resource
d, flip = sys.argv[1], sys.argv[2]
with h5py.File(f"{d}/probe.h5", "w") as f:
    f.attrs["resil_probe"] = "abc"
good = open(f"{d}/probe.h5", "rb").read()
at = good.find(b"resil_probe")
assert at > 0
seen = {}
for off in range(at - 24, at + 72):
    for byte in (0xff, 0x00):
        if good[off] == byte:
            continue
        bad = bytearray(good); bad[off] = byte
        open(f"{d}/probe-bad.h5", "wb").write(bad)
        p = subprocess.run(["/usr/bin/prlimit", "--as=4000000000", "--", flip, "diff", f"{d}/probe.h5", f"{d}/probe-bad.h5", "--json"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode in (0, 4), (off, byte, p.returncode, p.stderr[-300:])
        if p.returncode == 0:
            j = json.loads(p.stdout)
            st = {o["name"]: o["status"] for o in j["other"]}
            assert not j["identical"] or st == {}, (off, byte, j)
            key = "same" if j["identical"] else "not compared" if any(v == "unsupported" for v in st.values()) else "differ"
        else:
            key = "refused"
        seen[key] = seen.get(key, 0) + 1
print("damaged attribute bytes:", seen)
PY

# A real DCP checkpoint (PyTorch 2.11): its optimizer's "kind" value changed in one copy.
DCP="$(dirname "$0")/../../inject/formats/torch_files/torch-2.11.0-h200/dcp_torch_save"
cp -r "$DCP" "$T/dcp1" && cp -r "$DCP" "$T/dcp2" && cp -r "$DCP" "$T/dcp3" || fail "could not copy $DCP"
$PY -c "
import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); i = b.find(b'adam'); assert i > 0 and b.find(b'adam', i + 1) < 0
b[i] = ord('A'); open(p, 'wb').write(b)" "$T/dcp2/__0_0.distcp" || fail "could not change the DCP value"
expect_rc 0 "$FLIP" diff "$T/dcp1" "$T/dcp2" --json
[ "$(json "$T/stdout" "j['identical'], sorted(set(x['status'] for x in j['datasets'])), [(o['name'], o['status']) for o in j['other']]")" = \
  "(False, ['same'], [('optim.kind', 'differ')])" ] || fail "DCP value: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" diff "$T/dcp1" "$T/dcp3" --json
[ "$(json "$T/stdout" "j['identical']")" = True ] || fail "DCP, same values: $(cat "$T/stdout")"

# torch.save views: what torch.load gives, not the storages.
if $PY -c "import torch" 2> /dev/null; then
  $PY - "$T" <<'PYEOF' || fail "could not write the torch inputs"
import sys, torch
T = sys.argv[1]
base = torch.arange(8, dtype=torch.float32)
torch.save({"w": base[0:4]}, f"{T}/v1.pt")
torch.save({"w": base[4:8]}, f"{T}/v2.pt")
torch.save({"w": base[4:8].clone()}, f"{T}/v3.pt")
x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
torch.save({"w": x.t()}, f"{T}/tr1.pt")                                       # strides (1, 3)
torch.save({"w": torch.arange(6, dtype=torch.float32).reshape(3, 2)}, f"{T}/tr3.pt")
torch.save({"w": x.t().contiguous()}, f"{T}/tr4.pt")
t = torch.ones(4)
torch.save({"a": t, "b": t}, f"{T}/sh1.pt")
torch.save({"a": t, "b": t.clone()}, f"{T}/sh2.pt")
big = torch.arange(3 * 400, dtype=torch.float64).reshape(3, 400)
torch.save({"m": big.t()[::2]}, f"{T}/st1.pt")                                # offset 0, strides (2, 400)
torch.save({"m": big.t()[::2].contiguous()}, f"{T}/st2.pt")
PYEOF
  check() {  # check A B: diff's differing counts per tensor equal torch.load's
    expect_rc 0 "$FLIP" diff "$T/$1.pt" "$T/$2.pt" --json
    got=$(json "$T/stdout" "sorted((k, v['status'], v['differing']) for k, v in d.items())")
    want=$($PY -c "
import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
out = []
for k in sorted(a):
    n = int((a[k].reshape(-1).view(torch.int32 if a[k].element_size() == 4 else torch.int64) !=
             b[k].reshape(-1).view(torch.int32 if b[k].element_size() == 4 else torch.int64)).sum())
    out.append(('/' + k, 'differ' if n else 'same', n))
print(out)" "$T/$1.pt" "$T/$2.pt")
    [ "$got" = "$want" ] || fail "diff $1 $2: $got, torch.load: $want"
  }
  check v1 v2; check v2 v3; check tr1 tr3; check tr1 tr4; check sh1 sh2; check st1 st2
  expect_rc 0 "$FLIP" diff "$T/v1.pt" "$T/v2.pt"
  grep -q "^/w  differ  4 of 4 elements" "$T/stdout" || fail "views text: $(cat "$T/stdout")"
  # A view and its clone hold equal tensors, but the saved objects differ (a 4-element view of an
  # 8-element storage vs a 4-element storage; b sharing a's storage or not): the pickle differs.
  for pair in "v2 v3" "sh1 sh2"; do
    set -- $pair
    expect_rc 0 "$FLIP" diff "$T/$1.pt" "$T/$2.pt" --json
    [ "$(json "$T/stdout" "j['identical'], sorted(set(v['status'] for v in d.values())), [(o['name'], o['status']) for o in j['other']]")" = \
      "(False, ['same'], [('pickle', 'differ')])" ] || fail "$pair: equal tensors, other pickles: $(cat "$T/stdout")"
  done
else
  echo "skip: torch views (no torch)"
fi
echo "ok: diff compares opaque bytes, types, views and zeros"
