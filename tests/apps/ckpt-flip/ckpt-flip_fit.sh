#!/bin/bash
# ckpt-flip fit as a black box with the shipped field-data fault models (examples/fault-models/
# dram-field-*.json) on small real campaigns (single-bit and adjacent double-bit flips of a tiny
# ckpt-train MLP, evaluated by ckpt-train eval): the point estimate is the Monte Carlo median, inside its
# own interval and the conservative bounds (also for an outcome no trial showed, whose plug-in value is
# 0), the interval is not degenerate, a fixed seed gives identical output, a drawn seed is printed and
# repeats the run, restore_probability scales every FIT, the older JSON fields are still there, and bad
# input exits 2.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-fit
FLIP=$1
TRAIN=$2
NOECC=$SRC/examples/fault-models/dram-field-noecc.json
SECDED=$SRC/examples/fault-models/dram-field-secded.json

run "$TRAIN" train --model mlp --epochs 1 --seed 3 --limit 512 --test-limit 200 --ckpt-dir "$T/ck"
CK=$("$TRAIN" latest --ckpt-dir "$T/ck")
# One campaign per campaign_model the shipped models use: flip and adjacent:2 (high bits, so some
# trials are SDCs and the posteriors are not all at 0).
for m in flip adjacent:2; do
  cat > "$T/c.json" <<EOF
{"name": "fit-$m", "checkpoint": "$CK",
 "command": ["$TRAIN", "eval", "--from", "{ckpt}", "--summary", "{out}"],
 "trials": 10, "seed": 5, "timeout_s": 60,
 "inject": {"flips": 1, "role": "model", "model": "$m", "bits": "20-31"},
 "metric": "test_accuracy", "tolerance": 0.01}
EOF
  run "$FLIP" campaign "$T/c.json" --out "$T/res-${m%%:*}"
done
RES=(--results "$T/res-flip" --results "$T/res-adjacent")

# No ECC, fixed seed, twice: identical JSON and text.
run "$FLIP" fit --fault-model "$NOECC" "${RES[@]}" --seed 11 --draws 20000 --json "$T/a.json"
grep -v '^JSON:' "$T/stdout" > "$T/a.txt"
grep -q "conservative bounds" "$T/a.txt" && grep -q "MC 95% interval" "$T/a.txt" && grep -q "injection only" "$T/a.txt" \
  && grep -q "low-level only" "$T/a.txt" && grep -q "seed 11;" "$T/a.txt" || { cat "$T/a.txt"; fail "fit text output"; }
grep -q "Sridharan" "$T/a.txt" && grep -q "1024 Mbit" "$T/a.txt" && grep -q "assumption:" "$T/a.txt" || fail "source and assumptions not printed"
grep -q "ILLUSTRATIVE" "$T/a.txt" && fail "the field-data model is printed as illustrative"
run "$FLIP" fit --fault-model "$NOECC" "${RES[@]}" --seed 11 --draws 20000 --json "$T/b.json"
grep -v '^JSON:' "$T/stdout" > "$T/b.txt"
cmp -s "$T/a.json" "$T/b.json" || fail "same seed, different JSON"
cmp -s "$T/a.txt" "$T/b.txt" || fail "same seed, different text"
run "$FLIP" fit --fault-model "$NOECC" "${RES[@]}" --seed 12 --json "$T/c.json"
# No seed: one is drawn, printed, and repeats the run.
run "$FLIP" fit --fault-model "$NOECC" "${RES[@]}" --json "$T/d.json"
S=$(sed -n 's/.*seed \([0-9]*\) (drawn; pass --seed to repeat).*/\1/p' "$T/stdout")
[ -n "$S" ] || { cat "$T/stdout"; fail "no drawn seed printed"; }
run "$FLIP" fit --fault-model "$NOECC" "${RES[@]}" --seed "$S" --json "$T/e.json"
cmp -s "$T/d.json" "$T/e.json" || fail "the printed seed does not repeat the run"

$PY - "$T" <<'PYEOF' || fail "fit JSON (no ECC)"
import json, sys
t = sys.argv[1]
a, c = json.load(open(t + "/a.json")), json.load(open(t + "/c.json"))
fm = a["fault_model"]
assert not fm["illustrative"] and "Sridharan" in fm["source"] and "transient" in fm["source"] and fm["assumptions"], fm
assert 0.0187 < a["raw_fit"] / a["mbit"] < 0.0188, a  # 19.2 FIT per 1 Gbit device, per Mbit
assert a["monte_carlo"]["draws"] == 20000 and a["monte_carlo"]["seed"] == 11 and c["monte_carlo"]["seed"] == 12
assert a["monte_carlo"]["raw_rate"].startswith("log-uniform") and a["monte_carlo"]["pattern_mix"] == "fixed"
assert a["raw_fit"] > 0 and a["mbit"] > 0 and len(a["per_pattern"]) == 7
assert all(p["measured"] and p["trials"] == 10 for p in a["per_pattern"]), a["per_pattern"]
for k in ("sdc", "critical_sdc", "due", "sdc_low_level_only", "sdc_injection_only"):
    v = a[k]
    assert {"fit", "plug_in", "lo", "hi", "complete"} <= v.keys(), v   # the fields older readers use, and the plug-in value
    assert v["complete"], (k, v)
    mc = v["mc"]
    assert v["lo"] <= mc["median"] <= v["hi"], (k, v)      # median within the conservative bounds
    assert mc["p2_5"] < mc["median"] < mc["p97_5"], (k, v)  # a non-degenerate interval
    assert mc["p97_5"] > 1.05 * mc["p2_5"], (k, v)
    assert mc["p2_5"] <= mc["mean"] <= mc["p97_5"], (k, v)
    assert v["fit"] == mc["median"] and mc["p2_5"] <= v["fit"] <= mc["p97_5"], (k, v)  # the point inside its interval
    assert v["lo"] <= v["plug_in"] <= v["hi"], (k, v)
    # Another seed: same plug-in value and bounds, different draws.
    assert (v["plug_in"], v["lo"], v["hi"]) == (c[k]["plug_in"], c[k]["lo"], c[k]["hi"]), k
    assert v["mc"] != c[k]["mc"], k
# Without ECC every upset escapes: the low-level-only SDC is the raw rate.
assert abs(a["sdc_low_level_only"]["plug_in"] - a["raw_fit"]) < 1e-6 * a["raw_fit"]
# An outcome no trial showed: plug-in 0, but the point (the median) is not 0, and lies inside the interval.
zero = [k for k in ("sdc", "critical_sdc", "due") if a[k]["plug_in"] == 0]
for k in zero:
    assert a[k]["fit"] > 0 and a[k]["mc"]["p2_5"] <= a[k]["fit"], (k, a[k])
PYEOF

# SEC-DED: single bits corrected, 2-bit words detected: SDC 0, DUE = raw x P(single-word) whatever
# the campaigns say; the single-level injection-only estimate still reports SDCs.
run "$FLIP" fit --fault-model "$SECDED" "${RES[@]}" --seed 11 --json "$T/s.json"
$PY - "$T/s.json" <<'PYEOF' || fail "fit JSON (SEC-DED)"
import json, sys
s = json.load(open(sys.argv[1]))
p_word = 1.4 / 19.2
assert s["sdc"]["fit"] == 0 and s["sdc"]["hi"] == 0 and s["sdc"]["mc"]["p97_5"] == 0, s["sdc"]
d = s["due"]
assert abs(d["plug_in"] - s["raw_fit"] * p_word) < 1e-3 * d["plug_in"], d
lo, hi = d["plug_in"] * 0.009375 / 0.01875, d["plug_in"] * 0.0375 / 0.01875
assert lo * 0.999 <= d["lo"] and d["hi"] <= hi * 1.001, d
assert lo * 0.999 <= d["mc"]["p2_5"] < d["mc"]["median"] < d["mc"]["p97_5"] <= hi * 1.001, d
assert s["sdc_injection_only"]["fit"] > 0
PYEOF

# restore_probability 0.25: a quarter of the corrupted checkpoints are ever restored; every FIT, its bounds
# and (same seed) its draws scale by 0.25, and the factor is printed.
$PY -c "import json; j=json.load(open('$NOECC')); j['restore_probability'] = 0.25; json.dump(j, open('$T/restore.json', 'w'))" || fail "test setup"
run "$FLIP" fit --fault-model "$T/restore.json" "${RES[@]}" --seed 11 --draws 20000 --json "$T/r.json"
grep -q "restore probability 0.25" "$T/stdout" || { cat "$T/stdout"; fail "restore probability not printed"; }
$PY - "$T" <<'PYEOF' || fail "restore_probability"
import json, sys
t = sys.argv[1]
a, r = json.load(open(t + "/a.json")), json.load(open(t + "/r.json"))
for k in ("sdc", "critical_sdc", "due", "sdc_low_level_only", "sdc_injection_only"):
    for f in ("fit", "plug_in", "lo", "hi"):
        assert abs(r[k][f] - 0.25 * a[k][f]) <= 1e-9 * max(1e-300, a[k][f]), (k, f, r[k][f], a[k][f])
PYEOF

# Only the single-bit campaign: the single-word pattern is unmeasured, the result incomplete.
run "$FLIP" fit --fault-model "$NOECC" --results "$T/res-flip" --seed 1 --draws 2000
grep -q "incomplete" "$T/stdout" && grep -q "not measured" "$T/stdout" || fail "unmeasured pattern not reported"

# Usage errors exit 2 with one line: negative draws, a fault model with a log-uniform range from 0.
expect2() { "$@" > "$T/stdout" 2> "$T/stderr"; local rc=$?; [ "$rc" = 2 ] && [ "$(wc -l < "$T/stderr")" = 1 ] || { cat "$T/stderr"; fail "exit $rc (want 2): $*"; }; }
expect2 "$FLIP" fit --fault-model "$NOECC" "${RES[@]}" --draws -1
$PY -c "import json; j=json.load(open('$NOECC')); j['raw_fit_per_mbit_range'][0] = 0; json.dump(j, open('$T/zero.json', 'w'))" || fail "test setup"
expect2 "$FLIP" fit --fault-model "$T/zero.json" "${RES[@]}"
grep -q "zero.json" "$T/stderr" || fail "the error does not name the fault model"
echo "ckpt-flip fit CLI: all checks passed"
