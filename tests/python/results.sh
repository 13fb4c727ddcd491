#!/bin/bash
# resil.results reads what ckpt-flip writes: a flip log of `inject` (each flip's words and values
# against the altered file itself, read with h5py), a cut log, a campaign directory (records of two
# shards, a torn last line) and `report --json`, whose counts and rates the readers' must equal; and
# it refuses malformed input with an error naming the file and line. Hostile input:
# records `ckpt-flip report` refuses (a trial id beyond the campaign's trials, negative or
# true, another seed or campaign id, a trial recorded twice with another metric or flips) are
# refused here too, and what both accept they count alike (a hidden .x.jsonl shard file, the same
# record twice); deep nesting, a FIFO, wrong field types and malformed flip-log records are a
# FormatError naming the file (never a hang, RecursionError or AttributeError); files are UTF-8 under
# any locale; a record's flips carry bits; counts by bit have int keys as trials_table has.
. "$(dirname "$0")/../support/test_lib.sh" python-results
FLIP=$1
export PYTHONPATH=$SRC/python
"$PY" - "$T/g.h5" <<'PYEOF' || fail "fixture"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["model/w"] = np.linspace(0.5, 1.5, 512, dtype=np.float32).reshape(16, 32)
    f["optimizer/w/m"] = np.full(64, 0.125, np.float32)
    f["model/step"] = np.arange(8, dtype=np.int64)
PYEOF
run "$FLIP" inject "$T/g.h5" -o "$T/x.h5" --seed 5 --flips 20 --log "$T/flips.jsonl" --include '/model/*'
# A log cut by a kill: its last line ends without a newline.
head -c -40 "$T/flips.jsonl" > "$T/cut.jsonl"
# A campaign in two shards: the class depends on the flipped value (sh + Python's json).
cat > "$T/trial.py" <<'PYEOF'
import json, sys, h5py, numpy as np
with h5py.File(sys.argv[1]) as f:
    w = np.asarray(f["model/w"])
acc = 0.5 if np.all(np.isfinite(w)) and abs(float(w.mean()) - 1.0) < 1e-3 else 0.1
json.dump({"test_accuracy": acc if np.all(np.isfinite(w)) else float("nan")}, open(sys.argv[2], "w"))
PYEOF
printf '%s\n' '{"name": "py-results", "checkpoint": "'"$T"'/g.h5", "command": ["'"$PY"'", "'"$T"'/trial.py", "{ckpt}", "{out}"],' \
  ' "trials": 12, "seed": 8, "timeout_s": 60, "inject": {"flips": 1, "role": "model", "bits": "exponent,mantissa", "strata": "field"}}' > "$T/c.json"
run "$FLIP" campaign "$T/c.json" --out "$T/out" --shard 0/2 --jobs 1
run "$FLIP" campaign "$T/c.json" --out "$T/out" --shard 1/2 --jobs 1
run "$FLIP" report "$T/out" --json "$T/report.json" --no-plots
cp -r "$T/out" "$T/torn"
printf '{"trial": 3, "cla' >> "$T/torn/results/shard-1-of-2.jsonl"
cp -r "$T/out" "$T/bad"
sed -i '2s/.*/{"trial": 99,/' "$T/bad/results/shard-0-of-2.jsonl"

"$PY" - "$T" <<'PYEOF' || fail "resil.results"
import h5py, math, numpy as np, sys
from resil import results
t = sys.argv[1]

log = results.read_flip_log(t + "/flips.jsonl")
assert log.complete and log.header["seed"] == 5 and len(log.flips) == 20, log.header
# Several flips of one word chain (the old of one is the new of the one before): the golden file
# holds the first one's old word, the altered file the last one's new word.
words = {}
for fl in log.flips:
    assert fl.mask == fl.old ^ fl.new and [b for b in range(64) if fl.mask >> b & 1] == fl.bits, fl
    words.setdefault((fl.dataset, tuple(fl.nd)), []).append(fl)
with h5py.File(t + "/x.h5") as f, h5py.File(t + "/g.h5") as g:
    for (dataset, idx), chain in words.items():
        d = dataset.lstrip("/")
        old, new = np.asarray(g[d])[idx], np.asarray(f[d])[idx]
        as_int = lambda v: int(v.view(np.uint32 if v.dtype == np.float32 else np.uint64))
        assert as_int(old) == chain[0].old and as_int(new) == chain[-1].new, chain
        assert all(a.new == b.old for a, b in zip(chain, chain[1:])), chain
        if chain[-1].dtype == "f32":
            v = float(new)
            assert (math.isnan(v) and math.isnan(chain[-1].new_value)) or v == chain[-1].new_value, (chain, v)
cut = results.read_flip_log(t + "/cut.jsonl")
assert not cut.complete and len(cut.flips) <= 20, cut

c = results.read_campaign(t + "/out")
rep = results.read_report(t + "/report.json")
assert [r["trial"] for r in c.records] == list(range(12)), [r["trial"] for r in c.records]
assert c.metrics == [{"name": "test_accuracy", "higher_is_better": True, "tolerance": 0.01}], c.metrics
assert c.golden["metric"] == 0.5 and c.space["total_bits"] == rep["space"]["total_bits"]
counts = results.counts(c.records)
for cls, r in rep["overall"]["classes"].items():
    assert counts.get(cls, 0) == r["x"], (cls, counts, r)
groups = results.counts(c.records, by="group")
for g, (p, lo, hi) in results.rates(rep).items():
    assert groups.get(g, 0) == rep["overall"]["groups"][g]["x"] and lo <= p <= hi, (g, groups, p, lo, hi)
rows = results.trials_table(c.records)
assert all(isinstance(r["bit"], int) and r["group"] == results.group_of(r["class"]) and r["role"] == "model" for r in rows), rows[0]
assert results.counts(c.records, by="field") == {k: v["n"] for k, v in rep["by"]["field"].items() if v["n"]}, rep["by"]["field"]
fl = results.flips_of(c.records[0])[0]
assert fl.mask == fl.old ^ fl.new and fl.dataset == "/model/w", fl

torn = results.read_records(t + "/torn")  # the torn last line is skipped
assert [r["trial"] for r in torn] == list(range(12))
try:
    results.read_records(t + "/bad")
    raise SystemExit("a malformed record was read")
except results.FormatError as e:
    assert "shard-0-of-2.jsonl:2" in str(e), e
try:
    results.read_report(t + "/flips.jsonl")
    raise SystemExit("a flip log was read as a report")
except results.FormatError as e:
    assert "flips.jsonl" in str(e), e
print("resil.results:", len(log.flips), "flips,", len(c.records), "records,", counts)
PYEOF

# Hostile input. Each case is a copy of the campaign with one change; `ckpt-flip report` is the
# reference: what it refuses (exit 4) read_records refuses, naming the same file and line.
"$PY" - "$T" "$FLIP" <<'PYEOF' || fail "resil.results on hostile input"
import collections, json, os, shutil, subprocess, sys
from resil import results
t, flip = sys.argv[1], sys.argv[2]
base = t + "/out"
shard = "/results/shard-0-of-2.jsonl"

def fresh(name):
    d = f"{t}/h-{name}"
    shutil.copytree(base, d)
    return d

def first():
    return json.loads(open(base + shard).readline())

def report(d):
    p = subprocess.run([flip, "report", d, "--no-plots"], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr

def refused(d, where, what, by_report=True):
    try:
        results.read_records(d)
    except results.FormatError as e:
        assert where in str(e) and what in str(e), (d, str(e))
    else:
        raise AssertionError(f"{d}: read_records accepted it")
    if by_report:
        rc, out = report(d)
        assert rc == 4 and where in out, (d, rc, out)

def append(d, name, rec):
    with open(d + "/results/" + name, "a") as f:
        f.write(json.dumps(rec) + "\n")

# Records of another campaign, or beyond this one's trials.
d = fresh("beyond"); append(d, "other.jsonl", dict(first(), trial=40))
refused(d, "other.jsonl:1", "outside the campaign's 12 trials")
d = fresh("seed"); append(d, "other.jsonl", dict(first(), trial=5, seed=999))
refused(d, "other.jsonl:1", "seed 999")
d = fresh("cid"); append(d, "other.jsonl", dict(first(), campaign="0123456789abcdef"))
refused(d, "other.jsonl:1", "0123456789abcdef")
for bad in (True, -3, 2.0):
    d = fresh(f"id-{bad}"); append(d, "zz.jsonl", dict(first(), trial=bad))
    refused(d, "zz.jsonl:1", "is not an integer >= 0")
# The same trial twice: another metric, flips or trial_seed is refused (naming both places), the
# same record counts once, as the report counts it.
for key, value in (("metric", 0.123), ("trial_seed", 7), ("flips", [])):
    d = fresh(f"dup-{key}"); append(d, "b.jsonl", dict(first(), **{key: value}))
    refused(d, "shard-0-of-2.jsonl:1", f'another "{key}"')
d = fresh("dup-same"); append(d, "b.jsonl", first())
assert len(results.read_records(d)) == 12 and report(d)[0] == 0
# A hidden shard file is a results file for ckpt-flip: counted here too.
d = fresh("hidden"); os.rename(d + shard, d + "/results/.shard-0-of-2.jsonl")
rc, out = report(d)
assert rc == 0 and "12/12 trials" in out and len(results.read_records(d)) == 12, out
# Wrong types: a FormatError naming the record, never an AttributeError.
d = fresh("strata"); append(d, "zz.jsonl", dict(first(), trial=11, strata=["x"]))
refused(d, "zz.jsonl:1", '"strata" is not an object')
d = fresh("wall"); append(d, "zz.jsonl", dict(first(), trial=11, wall_seconds="1"))
refused(d, "zz.jsonl:1", '"wall_seconds"')
for rec in (dict(first(), metrics={"accuracy": 0.5}), dict(first(), flips="x"), dict(first(), strata=["x"])):
    for fn in (results.trials_table, lambda rs: results.flips_of(rs[0]), results.counts):
        try:
            fn([rec])
        except results.FormatError:
            pass
        except AttributeError as e:
            raise AssertionError(f"AttributeError: {e}")
# Deep nesting: a FormatError naming the file (and line), not a RecursionError.
deep = "[" * 100000 + "]" * 100000
d = fresh("deep")
with open(d + shard, "r+") as f:
    lines = f.readlines(); f.seek(0); f.writelines([deep + "\n"] + lines)
refused(d, "shard-0-of-2.jsonl:1", "", by_report=False)
open(d + "/campaign.json", "w").write(deep)
open(d + "/report.json", "w").write(deep)
open(d + "/fl.jsonl", "w").write(deep + "\n{}\n")
for fn, path in ((results.read_campaign, d), (results.read_report, d + "/report.json"), (results.read_flip_log, d + "/fl.jsonl")):
    try:
        fn(path)
        raise AssertionError(f"{fn.__name__} read a nesting of 100000")
    except results.FormatError as e:
        assert "nested too deeply" in str(e), e
# A FIFO named *.jsonl in results/: refused at once (ckpt-flip refuses it too), not read forever.
d = fresh("fifo"); os.mkfifo(d + "/results/zz.jsonl")
p = subprocess.run([sys.executable, "-c", "import sys; from resil import results; results.read_records(sys.argv[1])", d],
                   capture_output=True, text=True, timeout=60)
assert p.returncode == 1 and "is a FIFO, not a regular file" in p.stderr, p.stderr
rc, out = report(d)
assert rc == 3, (rc, out)
# UTF-8 files under the C locale.
d = fresh("locale")
meta = json.load(open(d + "/campaign.json")); meta["note"] = "résumé ✓"
open(d + "/campaign.json", "w", encoding="utf-8").write(json.dumps(meta, ensure_ascii=False))
p = subprocess.run([sys.executable, "-c", "import sys; from resil import results; print(results.read_campaign(sys.argv[1]).dir)", d],
                   env=dict(os.environ, LC_ALL="C", PYTHONUTF8="0", PYTHONIOENCODING="ascii:backslashreplace"),
                   capture_output=True, text=True, timeout=60)
assert p.returncode == 0, p.stderr
# A record's flips carry bits (the mask's), counts by bit agree with trials_table.
c = results.read_campaign(base)
for r in c.records:
    for fl in results.flips_of(r):
        assert fl.bits == [b for b in range(64) if fl.mask >> b & 1] and fl.bits and fl.anchor in fl.bits, fl
assert results.counts(c.records, by="bit") == dict(collections.Counter(row["bit"] for row in results.trials_table(c.records)))
assert all(isinstance(k, int) for k in results.counts(c.records, by="bit"))
assert all(r.get("campaign") == results.campaign_id(c.config) for r in c.records)
# Malformed flip logs: each a FormatError naming its line.
lines = open(t + "/flips.jsonl").read().splitlines()
head, rec, foot = lines[0], json.loads(lines[1]), lines[-1]
for name, text, where in (
        ("bits-str", [head, json.dumps(dict(rec, bits=str(rec["bits"][0])))], ":2:"),
        ("bits-wrong", [head, json.dumps(dict(rec, bits=[b + 1 for b in rec["bits"]]))], ":2:"),
        ("value-str", [head, json.dumps(dict(rec, new_value="  Infinity "))], ":2:"),
        ("mask", [head, json.dumps(dict(rec, mask="abc"))], ":2:"),
        ("no-header", [json.dumps(rec), head], ":1:"),
        ("after-footer", [head, json.dumps(rec), foot, json.dumps(rec)], ":4:")):
    path = f"{t}/fl-{name}.jsonl"
    open(path, "w").write("\n".join(text) + "\n")
    try:
        results.read_flip_log(path)
        raise AssertionError(f"{name}: read")
    except results.FormatError as e:
        assert path + where in str(e), (name, str(e))
try:
    results.rates(results.read_report(t + "/report.json"), "by")
    raise AssertionError("rates of a level that is not one")
except ValueError as e:
    assert "groups" in str(e), e
print("resil.results: hostile input refused as ckpt-flip refuses it")
PYEOF
echo "python results: all checks passed"
