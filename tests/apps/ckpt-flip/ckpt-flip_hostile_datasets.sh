#!/bin/bash
# ckpt-flip on valid but hostile HDF5 files (tests/inject/hostile_files.py): null dataspaces and
# zero-sized dims, never-written datasets of 10^12 elements in a file of a few KB, names that are
# not UTF-8, fault spaces beyond 64 bits, hard links, element types and layouts ckpt-flip does
# not flip, virtual datasets and links into other files. Each check names the defect it guards.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-hostile
FLIP=$1
HOSTILE=$(dirname "$0")/../../inject/hostile_files.py
json() {  # json FILE PYTHON-EXPRESSION-OF-j : prints the value
  $PY -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}
build() { $PY "$HOSTILE" "$@" || fail "hostile_files.py $*"; }

# --- Null dataspace (h5py.Empty), scalar, zero-sized dims: no element is no stored bit.
build empty "$T/empty.h5"
expect_rc 0 "$FLIP" inspect "$T/empty.h5" --json
cp "$T/stdout" "$T/empty.json"
[ "$(json "$T/empty.json" "[d['fault_bits'] for d in j['datasets'] if d['dataset'] in ('/e','/e64','/z0','/z30','/z0c')]")" = "[0, 0, 0, 0, 0]" ] \
  || fail "null/zero-sized datasets have a fault space"
[ "$(json "$T/empty.json" "[d.get('null_dataspace', False) for d in j['datasets'] if d['dataset'] in ('/e','/s')]")" = "[True, False]" ] \
  || fail "null dataspace not flagged"
[ "$(json "$T/empty.json" "j['total_bits']")" = 160 ] || fail "total of empty.h5: scalar 32 + w 128 bits"
expect_rc 5 "$FLIP" inject "$T/empty.h5" -o "$T/o.h5" --log "$T/o.log" --flips 1 --seed 1 --include /e
[ ! -e "$T/o.h5" ] && [ ! -e "$T/o.log" ] || fail "partial output after nothing selected"
# Every draw lands in /s or /w, the only datasets with stored bits: null and zero-sized ones are never hit.
for seed in 1 2 3 4 5 6 7 8; do
  expect_rc 0 "$FLIP" inject "$T/empty.h5" -o "$T/o.h5" --log "$T/o.log" --flips 5 --seed $seed
  grep '"type":"flip"' "$T/o.log" | grep -qv '"dataset":"/[sw]"' && fail "a flip outside /s and /w (seed $seed)"
done
expect_rc 0 "$FLIP" scan "$T/empty.h5" --json
[ "$(json "$T/stdout" "[d['numel'] for d in j['datasets'] if d['dataset'] in ('/e','/s','/z30')]")" = "[0, 1, 0]" ] || fail "scan numel"
expect_rc 0 "$FLIP" diff "$T/empty.h5" "$T/o.h5" --json
[ "$(json "$T/stdout" "sorted(d['dataset'] for d in j['datasets'] if d['status'] != 'same')")" != "[]" ] || fail "diff saw no change"
expect_rc 0 "$FLIP" revert "$T/o.h5" --log "$T/o.log"
expect_rc 0 "$FLIP" diff "$T/empty.h5" "$T/o.h5" --json
[ "$(json "$T/stdout" "j['identical']")" = True ] || fail "revert on empty.h5"

# --- 10^12 never-written elements: scan and diff end at once (only allocated chunks are read).
build lazy "$T/lazy.h5"
build lazy_b "$T/lazy_b.h5"
[ "$(stat -c %s "$T/lazy.h5")" -lt 100000 ] || fail "lazy.h5 should be a few KB"
expect_rc 10 timeout 60 "$FLIP" scan "$T/lazy.h5" --json
[ "$(json "$T/stdout" "[(d['dataset'], d['numel'], d['exponent_outliers'], d['max_abs_index']) for d in j['datasets'] if d['dataset']=='/sparse']")" \
  = "[('/sparse', 1000000000000, 1, 999999999999)]" ] || fail "scan of the sparse dataset"
expect_rc 0 timeout 60 "$FLIP" diff "$T/lazy.h5" "$T/lazy_b.h5" --json
[ "$(json "$T/stdout" "[(d['dataset'], d['differing']) for d in j['datasets'] if d['status']=='differ']")" = "[('/big', 1), ('/sparse', 1)]" ] \
  || fail "diff of never-written datasets: $(cat "$T/stdout")"
# inject: sampling over the logical elements; a fault in a never-written chunk allocates that chunk
# only; the never-written contiguous 800 GB dataset is not selected (one flip would allocate it).
expect_rc 0 "$FLIP" inspect "$T/lazy.h5" --json
[ "$(json "$T/stdout" "[d['fault_bits'] for d in j['datasets'] if d['dataset']=='/contig']")" = "[0]" ] || fail "/contig is selectable"
expect_rc 5 "$FLIP" inject "$T/lazy.h5" -o "$T/o.h5" --log "$T/o.log" --flips 1 --seed 1 --include /contig
for mode in copy inplace; do
  cp "$T/lazy.h5" "$T/l.h5"
  if [ $mode = copy ]; then out=(-o "$T/o.h5"); res="$T/o.h5"; else out=(--in-place); res="$T/l.h5"; fi
  expect_rc 0 timeout 60 "$FLIP" inject "$T/l.h5" "${out[@]}" --log "$T/l.log" --flips 20 --seed 2
  [ "$(stat -c %s "$res")" -lt 10000000 ] || fail "$mode: injecting allocated more than the touched chunks"
  expect_rc 0 timeout 60 "$FLIP" revert "$res" --log "$T/l.log"
  expect_rc 0 timeout 60 "$FLIP" diff "$T/lazy.h5" "$res" --json
  [ "$(json "$T/stdout" "j['identical']")" = True ] || fail "$mode: revert of faults in never-written chunks"
done
# Sparse reading gives what reading every element gives (the same values fully written).
build sparse_pair "$T/spA.h5" "$T/dA.h5"
build sparse_pair_b "$T/spB.h5" "$T/dB.h5"
expect_rc 10 "$FLIP" scan "$T/spA.h5" --json; cp "$T/stdout" "$T/s1"
expect_rc 10 "$FLIP" scan "$T/dA.h5" --json; cp "$T/stdout" "$T/s2"
cmp -s "$T/s1" "$T/s2" || { diff "$T/s1" "$T/s2"; fail "scan: sparse and fully written files differ"; }
expect_rc 0 "$FLIP" diff "$T/spA.h5" "$T/spB.h5" --json; cp "$T/stdout" "$T/d1"
expect_rc 0 "$FLIP" diff "$T/dA.h5" "$T/dB.h5" --json; cp "$T/stdout" "$T/d2"
expect_rc 0 "$FLIP" diff "$T/spA.h5" "$T/dB.h5" --json; cp "$T/stdout" "$T/d3"
cmp -s "$T/d1" "$T/d2" && cmp -s "$T/d1" "$T/d3" || { diff "$T/d1" "$T/d2"; fail "diff: sparse and fully written files differ"; }
[ "$(json "$T/d1" "[(d['dataset'], d['differing']) for d in j['datasets']]")" = "[('/a', 2), ('/b', 0)]" ] || fail "sparse diff counts"
rm -f "$T"/dA.h5 "$T"/dB.h5
# Different chunk shapes in A and B: chunks allocated in both are compared once.
build rechunked "$T/rA.h5" "$T/dA.h5"
build rechunked_b "$T/rB.h5" "$T/dB.h5"
for pair in "rA rB" "rB rA"; do
  set -- $pair
  expect_rc 0 "$FLIP" diff "$T/$1.h5" "$T/$2.h5" --json; cp "$T/stdout" "$T/d1"
  expect_rc 0 "$FLIP" diff "$T/d${1#r}.h5" "$T/d${2#r}.h5" --json; cp "$T/stdout" "$T/d2"
  cmp -s "$T/d1" "$T/d2" || { diff "$T/d1" "$T/d2"; fail "diff $pair: sparse and fully written files differ"; }
done
[ "$(json "$T/d1" "[d['differing'] for d in j['datasets']]")" = "[2]" ] || fail "rechunked diff counts"
rm -f "$T"/dA.h5 "$T"/dB.h5

# --- Names that are not UTF-8: escaped and flagged in JSON and logs; selectable; revert finds them.
build badname "$T/bad.h5"
SHA=$(sha "$T/bad.h5")
for c in inspect scan; do
  expect_rc 0 "$FLIP" $c "$T/bad.h5" --json
  [ "$(json "$T/stdout" "sorted((d['dataset'], d.get('dataset_escaped', False)) for d in j['datasets'])")" \
    = "[('/g\\\\xfe\\\\\\\\x/v\\\\xc3', True), ('/ok', False), ('/w\\\\xff', True)]" ] || fail "$c --json names: $(cat "$T/stdout")"
done
expect_rc 0 "$FLIP" diff "$T/bad.h5" "$T/bad.h5" --json
cp "$T/bad.h5" "$T/b.h5"
expect_rc 0 "$FLIP" inject "$T/b.h5" --in-place --log "$T/b.log" --flips 6 --seed 3 --include '/w\xff' --include '/g\xfe\\x/*'
[ "$(grep -c '"dataset_escaped":true' "$T/b.log")" = 6 ] || fail "log records of escaped names"
expect_rc 0 "$FLIP" inject "$T/b.h5" --in-place --log "$T/b2.log" --flips 2 --seed 4 --include $'/w\xff'
[ "$(grep -c '"dataset":"/w\\\\xff","dataset_escaped":true' "$T/b2.log")" = 2 ] || fail "raw-byte --include"
expect_rc 0 "$FLIP" revert "$T/b.h5" --log "$T/b2.log"
expect_rc 0 "$FLIP" revert "$T/b.h5" --log "$T/b.log"
[ "$(sha "$T/b.h5")" = "$SHA" ] || fail "revert of escaped names"
expect_rc 0 "$FLIP" inject "$T/bad.h5" -o "$T/o.h5" --log "$T/o.log" --flips 4 --seed 5
expect_rc 0 "$FLIP" replay "$T/bad.h5" --log "$T/o.log" -o "$T/r.h5"
cmp -s "$T/o.h5" "$T/r.h5" || fail "replay of escaped names"

# --- Campaigns over these files: no abort at trial 0 (null dataspace), names escaped in records.
for f in empty bad; do
  $PY -c 'import json,sys; print(json.dumps({"name": "h", "checkpoint": sys.argv[1], "command": "echo '"'"'{\"acc\":1}'"'"' > {out}",
    "metric": "acc", "trials": 4, "inject": {"flips": 2}}))' "$T/$f.h5" > "$T/camp.json"
  rm -rf "$T/camp"
  expect_rc 0 "$FLIP" campaign "$T/camp.json" --out "$T/camp"
  expect_rc 0 "$FLIP" report "$T/camp" --no-plots
  [ "$(cat "$T"/camp/results/*.jsonl | wc -l)" = 4 ] || fail "campaign over $f.h5: 4 trial records"
done
grep -q '"dataset_escaped":true' "$T"/camp/results/*.jsonl || fail "campaign records of escaped names"

# --- Fault spaces beyond 64 bits: exact totals, every dataset drawn.
build overflow "$T/over.h5"
expect_rc 0 "$FLIP" inspect "$T/over.h5" --json
[ "$(json "$T/stdout" "[j['total_bits']] + [d['fault_bits'] for d in j['datasets']]")" \
  = "['322818021289917153280', '9223372036854775808', '9223372036854775808', '9223372036854775808', '295147905179352825856']" ] \
  || fail "fault bits beyond 2^64: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" plan "$T/over.h5"
grep -q "^fault space: 322818021289917153280 selected" "$T/stdout" || fail "plan total"
grep -q "f64: 295147905179352825856 bits (91.4286%)" "$T/stdout" || fail "plan share: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" inject "$T/over.h5" --dry-run --log "$T/o.log" --flips 60 --seed 1 --include '/t*'
for t in t0 t1 t2; do grep -q "^  /$t\[" "$T/stdout" || fail "no draw in /$t (sampling wrapped at 2^64)"; done
build maxdim "$T/max.h5"
expect_rc 0 timeout 60 "$FLIP" inject "$T/max.h5" -o "$T/o.h5" --log "$T/o.log" --flips 30 --seed 1 --include '**'
expect_rc 0 timeout 60 "$FLIP" diff "$T/max.h5" "$T/o.h5" --json
[ "$(json "$T/stdout" "[(d['numel'], d['differing']) for d in j['datasets']]")" = "[('9223372036854775807', 30)]" ] || fail "diff of i8[2^63-1]"
expect_rc 0 timeout 60 "$FLIP" scan "$T/o.h5"
expect_rc 0 timeout 60 "$FLIP" revert "$T/o.h5" --log "$T/o.log"
build toomany "$T/many.h5"
expect_rc 0 "$FLIP" inspect "$T/many.h5" --json
[ "$(json "$T/stdout" "[(d['dataset'], d['flippable']) for d in j['datasets']]")" = "[('/huge', False), ('/w', True)]" ] \
  || fail "2^80 elements must be unsupported"

# --- Hard links: one object, one share of the fault space, selectable under each path.
build hardlink "$T/hl.h5"
expect_rc 0 "$FLIP" inspect "$T/hl.h5" --json
[ "$(json "$T/stdout" "(j['total_bits'], [(d['dataset'], d.get('aliases')) for d in j['datasets']])")" \
  = "(320, [('/a', ['/b', '/g/c']), ('/other', None)])" ] || fail "hard links: $(cat "$T/stdout")"
for p in /a /b /g/c 'g/*' '/g/**'; do
  expect_rc 0 "$FLIP" inject "$T/hl.h5" -o "$T/o.h5" --log "$T/o.log" --flips 3 --seed 1 --include "$p"
  [ "$(grep -c '"dataset":"/a"' "$T/o.log")" = 3 ] || fail "--include $p"
done
expect_rc 5 "$FLIP" inject "$T/hl.h5" -o "$T/o.h5" --log "$T/o.log" --flips 1 --seed 1 --include /b --exclude /g/c

# --- Types and layouts: only integer/float datasets are drawn; the rest are shown, never touched.
build types "$T/types.h5"
expect_rc 0 "$FLIP" inspect "$T/types.h5" --json
[ "$(json "$T/stdout" "sorted(d['dataset'] for d in j['datasets'] if d['flippable'])")" \
  = "['/chunk1', '/compact', '/f16', '/f64be', '/fill', '/i8', '/rank32', '/u16', '/u64']" ] || fail "flippable types"
SHA=$(sha "$T/types.h5")
expect_rc 0 "$FLIP" inject "$T/types.h5" -o "$T/o.h5" --log "$T/o.log" --flips 200 --seed 9 --include '**'
grep '"type":"flip"' "$T/o.log" | grep -Eqv '"dataset":"/(chunk1|compact|f16|f64be|fill|i8|rank32|u16|u64)"' && fail "a flip in an unsupported dataset"
cp "$T/types.h5" "$T/t.h5"
expect_rc 0 "$FLIP" inject "$T/t.h5" --in-place --log "$T/t.log" --flips 200 --seed 9 --include '**'
# Every dataset the same, the uninterpreted ones by their stored bytes and variable-length strings
# by their text, except the variable-length sequence, which diff does not compare (so the files
# are never called identical).
SAME="(False, [('/vlen_f', 'unsupported')])"
expect_rc 0 "$FLIP" diff "$T/o.h5" "$T/t.h5" --json
[ "$(json "$T/stdout" "(j['identical'], [(d['dataset'], d['status']) for d in j['datasets'] if d['status'] != 'same'])")" = "$SAME" ] \
  || fail "in place and -o differ: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" revert "$T/t.h5" --log "$T/t.log"
expect_rc 0 "$FLIP" diff "$T/types.h5" "$T/t.h5" --json
[ "$(json "$T/stdout" "(j['identical'], [(d['dataset'], d['status']) for d in j['datasets'] if d['status'] != 'same'])")" = "$SAME" ] \
  || fail "revert on types.h5: $(cat "$T/stdout")"
[ "$(json "$T/stdout" "sorted(d['dataset'] for d in j['datasets'] if d['compared'] == 'bytes')")" \
  = "['/array', '/bitfield', '/bool', '/compound', '/enum', '/opaque', '/ref', '/string']" ] || fail "types compared by bytes: $(cat "$T/stdout")"
expect_rc 0 "$FLIP" scan "$T/types.h5"
[ "$(sha "$T/types.h5")" = "$SHA" ] || fail "types.h5 modified"

# --- Virtual datasets and links into other files: nothing outside the file is ever written.
build vds "$T/vds.h5" "$T/vds_src.h5"
build links "$T/links.h5" "$T/other.h5"
S1=$(sha "$T/vds_src.h5"); S2=$(sha "$T/other.h5")
for f in vds links; do
  expect_rc 0 "$FLIP" inspect "$T/$f.h5" --json
  [ "$(json "$T/stdout" "sorted(d['dataset'] for d in j['datasets'] if d['fault_bits'])")" = "['/w']" ] || fail "$f: only /w has stored bits"
  expect_rc 0 "$FLIP" scan "$T/$f.h5"
  expect_rc 0 "$FLIP" inject "$T/$f.h5" --in-place --log "$T/$f.log" --flips 50 --seed 1 --include '**'
  expect_rc 0 "$FLIP" inject "$T/$f.h5" -o "$T/o.h5" --log "$T/o.log" --flips 50 --seed 2 --include '**'
  expect_rc 0 "$FLIP" diff "$T/$f.h5" "$T/o.h5"
  expect_rc 0 "$FLIP" revert "$T/$f.h5" --log "$T/$f.log"
done
expect_rc 5 "$FLIP" inject "$T/vds.h5" -o "$T/o.h5" --log "$T/o.log" --flips 1 --seed 1 --include /virt
expect_rc 5 "$FLIP" inject "$T/links.h5" -o "$T/o.h5" --log "$T/o.log" --flips 1 --seed 1 --include /ext
[ "$(sha "$T/vds_src.h5")" = "$S1" ] && [ "$(sha "$T/other.h5")" = "$S2" ] || fail "a file outside the input was modified"

# --- A chain of nested groups: HDF5's walk costs time cubic in its depth (1,000 levels took 7 s,
# 5,000 most of an hour). 256 levels are read; deeper is exit 4 with one line, at once.
$PY - "$T" <<'PY' || fail "could not write the nested files"
import sys, h5py, numpy as np
for depth in (255, 5000):
    with h5py.File(f"{sys.argv[1]}/deep{depth}.h5", "w") as f:
        g = f
        for _ in range(depth):
            g = g.create_group("g")
        g["w"] = np.ones(4, "f4")
PY
expect_rc 0 "$FLIP" inspect "$T/deep255.h5" --json
[ "$(json "$T/stdout" "[(d['dataset'] == '/g' * 255 + '/w', d['fault_bits']) for d in j['datasets']]")" = "[(True, 128)]" ] ||
  fail "the dataset under 255 groups is not listed: $(head -c 300 "$T/stdout")"
rm -f "$T/o.h5" "$T/o.log"
for cmd in inspect scan "inject -o $T/o.h5 --log $T/o.log --flips 1 --seed 1"; do
  expect_rc 4 "$FLIP" $cmd "$T/deep5000.h5"
  [ "$(wc -l < "$T/stderr")" = 1 ] && grep -q "groups nested deeper than 256 levels" "$T/stderr" ||
    fail "$cmd of 5,000 nested groups: $(head -c 300 "$T/stderr")"
done
[ ! -e "$T/o.h5" ] || fail "inject of 5,000 nested groups wrote an output"
echo "ok"
