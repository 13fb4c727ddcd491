#!/bin/bash
# scripts/study/transformer.py on a tiny bf16 gpt (--plan smoke): the full plan's arm listing (every family,
# the three modes and seeds, per-bit and per-tensor strata, bit 14 spared where an arm says so) and its CPU
# budget (sum of n x the measured rate of the arm's mode and point); real golden runs, noise, an optimizer
# campaign, 10 flips sparing bf16's exponent MSB and a per-tensor campaign, published; AdamW's v split into
# shrinks / grows / negative checked against the checkpoint's own words (h5py, numpy); the PVF table
# from the per-tensor records against an independent count; the report and its rules (uniform arms, exponent-MSB
# set or cleared, no band, verdicts waiting for noise arms, a silent degradation only on the worse side); a re-run records nothing new, nor
# does a run in a fresh directory whose arms are published; goldens.json keeps the golden runs of earlier runs.
. "$(dirname "$0")/../../support/test_lib.sh" study-transformer
BUILD=$(realpath "$1")
export PYTHONPATH="$SRC/scripts/study${PYTHONPATH:+:$PYTHONPATH}"
S=(/usr/bin/python3 "$SRC/scripts/study/transformer.py")

# 1. The full plan: arms and budget.
mkdir -p "$T/rates"
cat > "$T/rates/rates.json" <<'EOF'
{"plan": "full", "trials": 3, "ranks": 2, "cores": 2, "load_average": [1.0, 1.0, 1.0], "measured": "2026-11-27 00:00 UTC",
 "rates": {"dp-late": {"cpu_seconds": 20.0, "wall_seconds": 11.0}, "dp-early": {"cpu_seconds": 40.0, "wall_seconds": 21.0},
           "pp-late": {"cpu_seconds": 25.0, "wall_seconds": 13.0}, "tp-late": {"cpu_seconds": 30.0, "wall_seconds": 16.0}}}
EOF
run "${S[@]}" plan --publish "$T/rates"
cp "$T/stdout" "$T/plan.txt"
$PY - "$T/plan.txt" <<'PYEOF' || fail "the full plan"
import re, sys
import gpt_plan as G
text = open(sys.argv[1]).read()
arms = G.arms("full")
names = [a.name for a in arms]
assert len(names) == len(set(names)), "arm names repeat"
for a in arms:
    assert re.search(rf"^  {re.escape(a.name)} +{a.kind} +n= *{a.n} ", text, re.M), f"plan does not list {a.name} n={a.n}"
fam = {a.family for a in arms}
assert fam == {"noise", "primary", "bits", "msb", "mode", "early", "kflip", "pvf", "seeds"}, fam
by = {a.name: a for a in arms}
# the roles of the primary, per-bit strata sized per bit position of the role's dtype
assert {a.role for a in arms if a.family == "primary"} == {"model", "master", "optimizer"}
assert by["dp-model-late-bits"].n == 16 * G.FULL_SIZES["per_bit"] and by["dp-model-late-bits"].strata == "bit"
assert by["dp-master-late-bits"].n == 32 * G.FULL_SIZES["per_bit"] and by["dp-optimizer-late-bits"].n == 32 * G.FULL_SIZES["per_bit"]
# the exponent MSB: enriched on its own, spared by the -nomsb arms (bf16 bits 0-13 and 15)
assert by["dp-model-late-bit14"].bits == "14" and by["dp-master-late-bit30"].bits == "30"
nomsb = [a for a in arms if a.name.endswith("-nomsb")]
assert sorted(a.flips for a in nomsb) == [1, 10, 100] and all(a.bits == "0-13,15" and a.role == "model" for a in nomsb), nomsb
assert sorted(a.flips for a in arms if a.family == "kflip" and a.bits is None) == [10, 100]
# dp vs pp vs tp, one replica; early; three seeds; per tensor (2 + 12 x 2 + 2 = 28 tensors)
assert {(a.mode, a.replica) for a in arms if a.family == "mode"} == {("pp", False), ("tp", False), ("dp", True)}
assert {a.role for a in arms if a.family == "early"} == {"model", "master", "optimizer"} and all(a.point == "early" for a in arms if a.family == "early")
assert {g[1:] for g in G.goldens(arms)} == {("dp", "adamw", 1), ("pp", "adamw", 1), ("tp", "adamw", 1), ("dp", "adamw", 2), ("dp", "adamw", 3)}
assert by["dp-model-late-tensors"].n == 28 * G.FULL_SIZES["per_tensor"] and by["dp-model-late-tensors"].strata == "tensor"
# the noise band: late pooled over the three modes, early dp, each n >= 93 (95 % content, 95 % confidence)
late = sum(a.n for a in arms if a.family == "noise" and a.seed == 1 and a.point == "late")
early = sum(a.n for a in arms if a.family == "noise" and a.point == "early")
assert late >= 93 and early >= 93, (late, early)
# the budget: sum of n x the rate of the arm's mode and point (dp's for the one-replica arm)
rate = {"dp-late": 20.0, "dp-early": 40.0, "pp-late": 25.0, "tp-late": 30.0}
cpu = sum(a.n * rate[f"{a.mode}-{a.point}"] for a in arms)
m = re.search(r"total (\d+) trials: ([\d.]+) CPU-h = ([\d.]+) h on 2 free cores", text)
assert m and int(m.group(1)) == sum(a.n for a in arms), text[-400:]
assert abs(float(m.group(2)) - cpu / 3600) < 0.06 and abs(float(m.group(3)) - cpu / 7200) < 0.06, (m.groups(), cpu)
print("plan:", len(arms), "arms,", sum(a.n for a in arms), "trials,", round(cpu / 3600, 1), "CPU-h at the test's rates")
PYEOF

# 2. Real arms of the smoke plan (one golden run, dp, seed 1).
ARMS=(noise-ulp-dp-late noise-order-dp-late dp-optimizer-late dp-model-late-k10-nomsb dp-model-late-tensors)
run "${S[@]}" run --plan smoke --build "$BUILD" --dir "$T/s" --publish "$T/pub" --only "${ARMS[@]}"
for a in "${ARMS[@]}"; do [ -s "$T/pub/$a.jsonl.gz" ] || fail "arm $a not published"; done
CK=$(ls "$T"/s/golden/gpt-dp-adamw-s1/ckpt/ckpt-step00000016.h5) || fail "no late checkpoint (epoch 4 of 4 steps each)"

# 3. v shrinks / grows / negative on real flips of exp_avg_sq's high bits (exponent and sign), each record's
#    category against the word h5py reads from the checkpoint, flipped with numpy.
cat > "$T/v.json" <<EOF
{"name": "v", "checkpoint": "$CK", "command": ["$BUILD/bin/ckpt-train", "eval", "--from", "{ckpt}", "--test-limit", "16", "--summary", "{out}"],
 "trials": 10, "seed": 5, "timeout_s": 120, "inject": {"role": "optimizer", "include": ["*exp_avg_sq"], "bits": "25-31"},
 "metric": "test_bpb", "higher_is_better": false, "tolerance": 0.05}
EOF
run "$BUILD/bin/ckpt-flip" campaign "$T/v.json" --out "$T/v" --jobs 1
$PY - "$T/v" "$CK" "$T/pub" <<'PYEOF' || fail "the v shrink/grow split"
import gzip, json, sys
import h5py, numpy as np
import dp_vs_mp as D, transformer as TR, transformer_report as TRR
recs = D.read_records(sys.argv[1])
assert len(recs) == 10, len(recs)
seen = {}
with h5py.File(sys.argv[2]) as f:
    for r in recs:
        s = TR.slim(r)
        fl = s["flips"][0]
        ds, idx, bit = fl[0], fl[2], fl[3]
        assert ds.endswith("/exp_avg_sq") and 25 <= bit <= 31, fl
        old = np.asarray(f[ds][()], dtype=np.float32).reshape(-1)[idx]
        new = (np.array([old], dtype=np.float32).view(np.uint32) ^ np.uint32(1 << bit)).view(np.float32)[0]
        assert old == fl[4] and (new == fl[5] or (np.isnan(new) and fl[5] != fl[5])), (old, new, fl)
        if not np.isfinite(new):
            want = "v non-finite"
        elif new < 0:
            want = "v negative"
        elif new == 0 and old == 0:
            want = "v -0" if bit == 31 else "v shrinks"
        else:
            want = "v grows" if abs(new) > abs(old) else "v shrinks"
        got = TRR.R.moment_effect(fl)
        assert got == want, (got, want, fl)
        seen[got] = seen.get(got, 0) + 1
assert "v grows" in seen and "v shrinks" in seen, seen
# the smoke optimizer arm's records split into m and v the same way (exp_avg is m whatever the bit)
with gzip.open(sys.argv[3] + "/dp-optimizer-late.jsonl.gz", "rt") as g:
    g.readline()
    for line in g:
        fl = json.loads(line)["flips"][0]
        assert (TRR.R.moment_effect(fl) == "m") == (not fl[0].endswith("exp_avg_sq")), fl
print("v split:", seen)
PYEOF

# 4. The exponent MSB spared, and the PVF table against an independent count of the per-tensor records.
$PY - "$T/pub" "$CK" <<'PYEOF' || fail "published records: MSB exclusion, PVF"
import gzip, json, sys
import h5py
import gpt_plan as G, transformer_report as TRR
pub, ck = sys.argv[1:]
def arm(n):
    with gzip.open(f"{pub}/{n}.jsonl.gz", "rt") as f:
        head = json.loads(f.readline())["head"]
        return head, [json.loads(l) for l in f]
_, k10 = arm("dp-model-late-k10-nomsb")
assert len(k10) == 2 and all(len(r["flips"]) == 10 for r in k10), k10
assert all(f[3] in set(range(14)) | {15} and f[0].startswith("/model/") for r in k10 for f in r["flips"]), "a -nomsb trial flipped bit 14"
assert all(e[0] == "bf16" for r in k10 for e in r["flip_extra"]), "the model role of a bf16 checkpoint is not bf16"
noise = [r["delta"] for n in ("noise-ulp-dp-late", "noise-order-dp-late") for r in arm(n)[1]]
lo, hi = min(noise), max(noise)
head, tens = arm("dp-model-late-tensors")
assert len(tens) == 6
# independent: per tensor n, and incorrect = DUE or delta outside [lo, hi]; stored bits = numel x 16 from h5py
want = {}
for r in tens:
    t = r["flips"][0][0].split("/")[-1]
    assert r["stratum"] == r["flips"][0][0], r
    bad = r["class"] in TRR.DUE or not (lo <= r["delta"] <= hi)
    n, x = want.get(t, (0, 0))
    want[t] = (n + 1, x + bad)
assert len(want) == 6, "equal allocation: the first 6 trials hit 6 tensors"
rows = [(r, TRR.classify(r, (lo, hi))) for r in tens]
per, groups = TRR.pvf_table(rows, head["space"])
with h5py.File(ck) as f:
    numel = {k: f["model"][k].size for k in f["model"]}
assert len(per) == G.tensor_count(2) == len(numel), (len(per), len(numel))
for t, e in per.items():
    assert e["bits"] == 16 * numel[t], (t, e, numel[t])
    assert (e["n"], e["incorrect"]) == want.get(t, (0, 0)), (t, e, want.get(t))
    assert e["group"] == ("embeddings" if t[:3] in ("wte", "wpe") else "attention" if ".attn." in t else "MLP" if ".mlp." in t
                          else "LayerNorm gains" if t.endswith("weight") else "LayerNorm biases"), (t, e["group"])
for g, e in groups.items():
    ts = [t for t in per if per[t]["group"] == g and per[t]["n"]]
    assert e["n"] == sum(per[t]["n"] for t in ts)
    if ts:
        point = sum(per[t]["bits"] * per[t]["incorrect"] / per[t]["n"] for t in ts) / sum(per[t]["bits"] for t in ts)
        assert abs(e["pvf"]["point"] - point) < 1e-12 and e["pvf"]["lo"] <= e["pvf"]["point"] <= e["pvf"]["hi"], (g, e, point)
print("pvf:", {g: (e["n"], e["incorrect"]) for g, e in groups.items()})
PYEOF

# 5. The report: sections, the PVF table, plots, partial arms marked; with a rate measurement, what is left in
# CPU-hours (from the records' CPU times, or the measured rate where a mode has no record).
cp "$T/rates/rates.json" "$T/pub/rates.json"
run "${S[@]}" report --publish "$T/pub" --out "$T/doc/r.md"
grep -q "^Still to run: .*CPU-h at the \(median\|measured\)" "$T/doc/r.md" || { grep -n "Still to run" "$T/doc/r.md"; fail "what is left, in CPU-hours"; }
rm "$T/pub/rates.json"
for s in "Partial study" "## CPU budget" "## Noise baseline" "## Campaigns: outcome classes" "## Per-bit sensitivity" \
         "## Per-tensor vulnerability (PVF)" "| group | tensors (sampled)" "## Findings" "### 1. The crucial-bit claim" \
         "### 2. Optimizer state" "### 3. dp vs pp vs tp" "### 4. Early vs late" "### 7. The four failure modes" "v shrinks" \
         "\`dp-model-late\` (0 of 3)"; do
  grep -qF -- "$s" "$T/doc/r.md" || { cat "$T/doc/r.md"; fail "the report lacks '$s'"; }
done
[ -s "$T/doc/transformer-outcomes.png" ] && [ -s "$T/doc/transformer-pvf-model.png" ] || fail "the report's plots"

# 6. A re-run runs and publishes nothing; a bad arm name is one error line, exit 2.
before=$(stat -c %Y "$T/pub/dp-model-late-tensors.jsonl.gz")
run "${S[@]}" run --plan smoke --build "$BUILD" --dir "$T/s" --publish "$T/pub" --only "${ARMS[@]}"
grep -q "campaign \|noise " "$T/stdout" && { cat "$T/stdout"; fail "a re-run ran arms again"; }
[ "$(stat -c %Y "$T/pub/dp-model-late-tensors.jsonl.gz")" = "$before" ] || fail "a re-run published again"
# ... and in a fresh directory the published arms are not run again either (only the golden run is).
run "${S[@]}" run --plan smoke --build "$BUILD" --dir "$T/s2" --publish "$T/pub" --only "${ARMS[@]}"
grep -q "campaign \|noise " "$T/stdout" && { cat "$T/stdout"; fail "a run in a fresh directory ran published arms again"; }
[ -d "$T/s2/campaigns" ] && [ -n "$(ls -A "$T/s2/campaigns")" ] && fail "a fresh directory got campaign directories"
[ "$(stat -c %Y "$T/pub/dp-model-late-tensors.jsonl.gz")" = "$before" ] || fail "a run in a fresh directory published again"
# A run of another golden's arm (pp) adds its golden to goldens.json and keeps dp's.
run "${S[@]}" run --plan smoke --build "$BUILD" --dir "$T/s" --publish "$T/pub" --only noise-ulp-pp-late
$PY -c "import json, sys; g = json.load(open(sys.argv[1]))['goldens']; assert set(g) == {'gpt-dp-adamw-s1', 'gpt-pp-adamw-s1'}, set(g)" \
  "$T/pub/goldens.json" || fail "goldens.json lost a golden run"
expect_err 2 "no-such-arm" "${S[@]}" run --plan smoke --dir "$T/s" --only no-such-arm
# A damaged published arm is refused, named, by a run (before anything runs) and by the report (exit 4).
cp -r "$T/pub" "$T/bad" && head -c 200 "$T/pub/dp-optimizer-late.jsonl.gz" > "$T/bad/dp-optimizer-late.jsonl.gz"
expect_err 4 "$T/bad/dp-optimizer-late.jsonl.gz" "${S[@]}" run --plan smoke --build "$BUILD" --dir "$T/s3" --publish "$T/bad" --only dp-optimizer-late
[ -e "$T/s3/golden" ] && fail "a run refusing its published records trained a golden run first"
expect_err 4 "$T/bad/dp-optimizer-late.jsonl.gz" "${S[@]}" report --publish "$T/bad" --out "$T/bad.md" --no-plots
# A damaged rates.json: plan and report refuse it with one line naming it (exit 4).
cp -r "$T/pub" "$T/pubr" && echo '{"plan": "full", "rates": {' > "$T/pubr/rates.json"
expect_err 4 "$T/pubr/rates.json" "${S[@]}" plan --publish "$T/pubr"
expect_err 4 "$T/pubr/rates.json" "${S[@]}" report --publish "$T/pubr" --out "$T/pubr.md" --no-plots
echo '{"plan": "full", "measured": "now", "trials": 3, "ranks": 2, "load_average": [1], "cores": 2, "rates": {"dp-late": {}}}' > "$T/pubr/rates.json"
expect_err 4 "$T/pubr/rates.json" "${S[@]}" plan --publish "$T/pubr"
# The report's rules on the full plan's arms: which arms are the uniform estimand (the failure-mode table and the
# outcome table's marks), which exponent-MSB flips set the bit (from the old value: a NaN result still counts),
# an arm without noise runs classifies only past the critical threshold, and a verdict waits for the noise arms
# behind the bands of its arms.
$PY - <<'PYEOF' || fail "the report's rules"
import math
import gpt_plan as G, transformer_report as TRR
arms = {a.name: a for a in G.arms("full")}
assert {n for n, a in arms.items() if TRR.uniform(a)} == {n for n, a in arms.items() if a.family != "noise" and a.strata == "none"
                                                         and a.bits is None}, "uniform arms"
assert not TRR.uniform(arms["dp-model-late-bit14"]) and not TRR.uniform(arms["dp-model-late-tensors"])
assert TRR.design_of(arms["dp-model-late-bit14"]) == "bit 14 only" and TRR.design_of(arms["dp-model-late-k10-nomsb"]) == "bits 0-13,15 only"
assert TRR.design_of(arms["dp-master-late-bits"]).startswith("per-bit") and TRR.design_of(arms["dp-model-late"]) == ""
flip = lambda old, new: ["/model/x", 0, [0], 14, old, new]
assert not TRR.msb_was_set(flip(1.25, math.nan)) and not TRR.msb_was_set(flip(0.01, 3e36)) and not TRR.msb_was_set(flip(-1.9, None))
assert TRR.msb_was_set(flip(2.5, 1e-38)) and TRR.msb_was_set(flip(None, 1.0))
rec = lambda d, c="masked": {"class": c, "delta": d}
assert TRR.classify(rec(0.001), None) == "unknown" and TRR.classify(rec(1.5), None) == "critical"
assert TRR.classify(rec(None, "nan_later"), None) == "due"
assert TRR.classify(rec(0.001), (-0.002, 0.002)) == "noise_changed" and TRR.classify(rec(0.01), (-0.002, 0.002)) == "sdc"
rep = TRR.Report.__new__(TRR.Report)
rep.arms, rep.data = list(arms.values()), {}
late = set(rep.noise_of("dp-master-late-s2"))
assert late == {n for n, a in arms.items() if a.family == "noise" and a.point == "late" and a.seed in (1, 2)}, late
assert set(rep.noise_of("dp-optimizer-early")) == {"noise-ulp-dp-early", "noise-order-dp-early"}
rep.data = {n: {"complete": True} for n in ("dp-master-early", "dp-master-late")}
assert "pending" in rep.verdict(["dp-master-early", "dp-master-late"], "decided")
rep.data.update({n: {"complete": True} for n in set(rep.noise_of("dp-master-early")) | set(rep.noise_of("dp-master-late"))})
assert rep.verdict(["dp-master-early", "dp-master-late"], "decided") == "decided"
# A loss curve within its band is a silent degradation only for an SDC on the worse side; one on the better
# side stays an SDC but its curve is within band. Above the band in the first window and back: spike and recover.
import report as R
g, band = [2.0, 2.0, 2.0], [0.01, 0.01, 0.01]
curve = lambda *lc: {"summary": {"loss_curve": list(lc)}}
assert R.curve_class(curve(2.0, 2.0, 2.0), g, band, "sdc", worse=True) == "silent_degradation"
assert R.curve_class(curve(2.0, 2.0, 2.0), g, band, "sdc", worse=False) == "within_band"
assert R.curve_class(curve(2.0, 2.0, 2.0), g, band, "noise_changed", worse=True) == "within_band"
assert R.curve_class(curve(2.5, 2.0, 2.0), g, band, "sdc") == "spike_recover"
assert R.curve_class(curve(2.5, 2.5, 2.5), g, band, "sdc") == "spike_degrade"
assert R.curve_class(curve(2.0, 2.0, 2.5), g, band, "sdc") == "gradual_drift"
assert R.curve_class(curve(2.0, 2.0, 2.0), g, band, "due") == "diverged"
PYEOF
echo "study transformer: all checks passed"
