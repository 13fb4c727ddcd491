#!/bin/bash
# What a trial script writes at {out}, read as it is: summaries written by Python's json.dump, whose
# default writes NaN, Infinity and -Infinity for non-finite floats, are read and their non-finite
# metrics classified nan_later (the injected values are finite: mantissa bits only); a summary the
# campaign cannot read (not JSON, empty, absent, no metric, a metric that is a string) is
# unreadable_summary with the reason in its note, never crash; the report lists each reason with
# its trials (text, markdown, JSON: group "unknown"), and fit warns about them. Two metrics: masked
# only when both held, each metric's verdict in the records, counted per metric in the report.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-summaries
FLIP=$1
$PY - "$T/g.h5" <<'PYEOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["model/w"] = np.linspace(0.5, 1.5, 256, dtype=np.float32)
PYEOF
# The trial command: a Python script whose summary depends on the trial id (mod 9). The golden run's
# summary has a NaN in a field the campaign does not compare.
cat > "$T/trial.py" <<'PYEOF'
import json, sys
trial, out = sys.argv[1], sys.argv[2]
def dump(d):
    with open(out, "w") as f:
        json.dump(d, f)  # Python's default: NaN, Infinity, -Infinity for non-finite floats
if trial == "golden":
    dump({"test_accuracy": 0.5, "test_loss": 1.25, "nan_step": float("nan")})
    sys.exit(0)
case = int(trial) % 9
if case == 0: dump({"test_accuracy": float("nan"), "test_loss": float("nan")})
elif case == 1: dump({"test_accuracy": float("inf")})
elif case == 2: dump({"test_accuracy": -float("inf")})
elif case == 3: open(out, "w").write("accuracy=0.5\n")
elif case == 4: open(out, "w").write("")
elif case == 5: pass  # exit 0 without a summary
elif case == 6: dump({"loss": 1.0})
elif case == 7: dump({"test_accuracy": "0.5"})
elif case == 8: dump({"test_accuracy": 0.5, "test_loss": float("inf")})  # the compared metric held: masked
PYEOF
printf '%s\n' '{"name": "summaries", "checkpoint": "'"$T"'/g.h5", "command": ["'"$PY"'", "'"$T"'/trial.py", "{trial}", "{out}"],' \
  ' "trials": 9, "seed": 4, "timeout_s": 60, "inject": {"flips": 1, "bits": "0-22"}}' > "$T/c.json"
run "$FLIP" campaign "$T/c.json" --out "$T/out" --jobs 2
run "$FLIP" report "$T/out" --json "$T/report.json" --markdown "$T/report.md" --no-plots
cp "$T/stdout" "$T/report.txt"
$PY - "$T" <<'PYEOF' || fail "records or report"
import glob, json, sys
t = sys.argv[1]
recs = {}
for f in glob.glob(t + "/out/results/*.jsonl"):
    for line in open(f):
        r = json.loads(line)
        recs[r["trial"]] = r
want = {0: ("nan_later", "test_accuracy is NaN"), 1: ("nan_later", "test_accuracy is Infinity"),
        2: ("nan_later", "test_accuracy is -Infinity"), 3: ("unreadable_summary", "{out} is not JSON: "),
        4: ("unreadable_summary", "{out} is empty"), 5: ("unreadable_summary", "no summary at {out}"),
        6: ("unreadable_summary", 'the summary has no "test_accuracy"'),
        7: ("unreadable_summary", '"test_accuracy" is string, not a number'), 8: ("masked", "")}
for n, (cls, note) in want.items():
    r = recs[n]
    assert r["class"] == cls and r["note"].startswith(note), (n, r["class"], r["note"])
    assert r["flips"][0]["new_value"] is not None and r["injected_nonfinite"] is False, r
assert recs[0]["metric"] is None and recs[0]["summary"]["test_loss"] is None, recs[0]  # records stay strict JSON
assert recs[8]["metric"] == 0.5 and recs[8]["delta"] == 0, recs[8]
golden = json.load(open(t + "/out/golden.json"))
assert golden["metric"] == 0.5 and golden["summary"]["nan_step"] is None, golden
rep = json.load(open(t + "/report.json"))
assert rep["overall"]["classes"]["unreadable_summary"]["x"] == 5, rep["overall"]["classes"]
assert rep["overall"]["groups"]["unknown"]["x"] == 5 and rep["overall"]["groups"]["due"]["x"] == 3, rep["overall"]["groups"]
assert rep["overall"]["classes"]["crash"]["x"] == 0
u = rep["unreadable_summaries"]
assert sorted(sum(u.values(), [])) == [3, 4, 5, 6, 7] and u["no summary at {out}"] == [5], u
PYEOF
grep -q "5 trial(s) wrote no summary the campaign could read" "$T/report.txt" || { cat "$T/report.txt"; fail "the text report does not count them"; }
grep -q '  the summary has no "test_accuracy": 1 trial (6)' "$T/report.txt" || { cat "$T/report.txt"; fail "the text report does not give each reason"; }
grep -q "^## Unreadable summaries" "$T/report.md" && grep -q '^-  {out} is empty: 1 trial (4)' "$T/report.md" || { cat "$T/report.md"; fail "the markdown report does not list them"; }
run "$FLIP" fit --fault-model "$SRC/examples/fault-models/dram-field-noecc.json" --results "$T/out" --seed 1 --draws 0
grep -q "5 trial(s) wrote no summary the campaign could read" "$T/stderr" || { cat "$T/stderr"; fail "fit does not warn about them"; }
# A golden run whose metric is NaN is no reference: refused, naming the metric.
sed 's/"test_accuracy": 0.5, "test_loss": 1.25/"test_accuracy": float("nan")/' "$T/trial.py" > "$T/trial-nan.py"
sed "s#$T/trial.py#$T/trial-nan.py#" "$T/c.json" > "$T/c-nan.json"
expect_err 2 'finite number "test_accuracy"' "$FLIP" campaign "$T/c-nan.json" --out "$T/out-nan"

# Two metrics: the trial's accuracy always holds; its loss holds, moves within its tolerance,
# beyond it, or is NaN. Masked only when both held; the records give each metric's verdict and the
# report counts them per metric.
cat > "$T/two.py" <<'PYEOF'
import json, sys
trial, out = sys.argv[1], sys.argv[2]
loss = 1.25 if trial == "golden" else [1.25, 1.26, 1.5, float("nan"), 1.0][int(trial) % 5]
json.dump({"test_accuracy": 0.5, "test_loss": loss}, open(out, "w"))
PYEOF
printf '%s\n' '{"name": "two-metrics", "checkpoint": "'"$T"'/g.h5", "command": ["'"$PY"'", "'"$T"'/two.py", "{trial}", "{out}"],' \
  ' "trials": 5, "seed": 4, "timeout_s": 60, "inject": {"flips": 1, "bits": "0-22"},' \
  ' "metrics": [{"name": "test_accuracy", "tolerance": 0.01}, {"name": "test_loss", "tolerance": 0.1, "higher_is_better": false}]}' > "$T/two.json"
run "$FLIP" campaign "$T/two.json" --out "$T/two" --jobs 2
run "$FLIP" report "$T/two" --json "$T/two-report.json" --markdown "$T/two-report.md" --no-plots
cp "$T/stdout" "$T/two-report.txt"
$PY - "$T" <<'PYEOF' || fail "two metrics"
import glob, json, sys
t = sys.argv[1]
recs = {r["trial"]: r for f in glob.glob(t + "/two/results/*.jsonl") for r in map(json.loads, open(f))}
want = ["masked", "tolerable_sdc", "critical_sdc", "nan_later", "tolerable_sdc"]
assert [recs[i]["class"] for i in range(5)] == want, [recs[i]["class"] for i in range(5)]
assert [recs[i]["metrics"]["test_loss"]["verdict"] for i in range(5)] == ["masked", "tolerable", "critical", "nonfinite", "tolerable"]
assert all(recs[i]["metrics"]["test_accuracy"]["verdict"] == "masked" and recs[i]["metric"] == 0.5 for i in range(5))
assert recs[2]["note"] == "test_loss +0.25 (tolerance 0.1)" and recs[3]["note"] == "test_loss is NaN", (recs[2]["note"], recs[3]["note"])
assert recs[2]["summary"]["test_loss"] == 1.5
golden = json.load(open(t + "/two/golden.json"))
assert golden["metrics"] == {"test_accuracy": 0.5, "test_loss": 1.25}, golden
cfg = json.load(open(t + "/two/campaign.json"))["config"]
assert [m["name"] for m in cfg["metrics"]] == ["test_accuracy", "test_loss"] and "metric" not in cfg, cfg
rep = json.load(open(t + "/two-report.json"))
m = {x["name"]: x for x in rep["metrics"]}
assert m["test_loss"]["verdicts"] == {"masked": 1, "tolerable": 2, "critical": 1, "nonfinite": 1}, m
assert m["test_accuracy"]["verdicts"]["masked"] == 5 and m["test_loss"]["golden"] == 1.25, m
PYEOF
grep -q "golden test_accuracy = 0.5, test_loss = 1.25" "$T/two-report.txt" || { cat "$T/two-report.txt"; fail "the golden line names both metrics"; }
grep -q "^test_loss  *0.1 (lower better)  *1  *2  *1  *1" "$T/two-report.txt" || { cat "$T/two-report.txt"; fail "the text report counts per metric"; }
# A tolerance cell as wide as its column ("0.01 (higher better)") still has a space before the counts.
grep -q "^test_accuracy  *0.01 (higher better) 5  *0  *0  *0" "$T/two-report.txt" || { cat "$T/two-report.txt"; fail "the text report's columns run together"; }
grep -q "^| test_loss | 0.1 (lower is better) | 1 | 2 | 1 | 1 |" "$T/two-report.md" || { cat "$T/two-report.md"; fail "the markdown report counts per metric"; }
grep -q "critical SDC: any metric worse than golden's by more than its tolerance" "$T/two-report.md" || fail "the markdown report states the rule"
echo "summaries: all checks passed"
