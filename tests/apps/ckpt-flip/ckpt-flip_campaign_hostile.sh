#!/bin/bash
# ckpt-flip campaign / report / fit against hostile input: numeric configuration fields
# at and past their limits, wrong JSON types, planned trials far beyond memory, trial commands that
# truncate, delete or replace {ckpt}, kill -9 of the campaign while a trial runs, inputs inside the
# output directory, results files that are directories, FIFOs or hold foreign records (another
# seed, another result for the same trial), report/fit outputs over their own inputs, two
# processes on one shard, --shard and --seed edge cases, a pattern table that is a FIFO, a campaign
# continued from another working directory, the configuration file inside OUT, a gzip-chunked HDF5
# golden whose edits rename a staged copy over {ckpt}.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-hostile
FLIP=$1
EXPECT_TIMEOUT=60  # a FIFO results file must not block the test forever
CAMPAIGN_PID=
on_exit() { [ -n "$CAMPAIGN_PID" ] && kill -9 "$CAMPAIGN_PID" 2> /dev/null; }

# A small golden checkpoint (h5py) and a trial command that reports the golden metric.
$PY - "$T/g.h5" <<'PYEOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["model/w"] = np.ones(64, np.float32)
    f["optimizer/w/m"] = np.full(32, 0.125, np.float32)
PYEOF
GOLDEN_SHA=$(sha "$T/g.h5")
OK='echo "{\"test_accuracy\": 0.5}" > {out}'
config() {  # config FILE EXTRA_JSON_MEMBERS [COMMAND]
  local cmd=${3:-$OK}
  $PY - "$1" "$T/g.h5" "$cmd" "$2" <<'PYEOF'
import json, sys
c = {"checkpoint": sys.argv[2], "command": sys.argv[3], "timeout_s": 60}
c.update(json.loads("{" + sys.argv[4] + "}"))
json.dump(c, open(sys.argv[1], "w"))
PYEOF
}
n_records() { cat "$1"/results/*.jsonl 2> /dev/null | wc -l; }

# 1. Numeric and typed configuration fields: exit 2 naming the key, nothing run.
check_bad() {  # check_bad KEY JSON_MEMBERS
  config "$T/bad.json" "$2"
  rm -rf "$T/bad-out"
  expect_err 2 "$1" "$FLIP" campaign "$T/bad.json" --out "$T/bad-out" -q
  [ ! -e "$T/bad-out/results" ] || fail "a refused configuration left results: $2"
  expect_err 2 "$1" "$FLIP" plan "$T/bad.json"
}
for v in 0 -5 1.5 '"5"' null true 1e308 '[3]'; do check_bad trials "\"trials\": $v"; done
for v in -1 1e30 18446744073709551616 0.5 '"7"' null false; do check_bad seed "\"seed\": $v"; done
for v in 0 -1 '"60"' null true; do check_bad timeout_s "\"timeout_s\": $v"; done
for v in 0 -2 1.5 1e9 '"2"' null; do check_bad inject.flips "\"inject\": {\"flips\": $v}"; done
for v in -0.1 '"0.01"' null; do check_bad tolerance "\"tolerance\": $v"; done
for v in 0 1 1.5 -0.5 '"0.95"' null; do check_bad confidence "\"confidence\": $v"; done
for v in '[4, 300]' '[-1]' '[0]' '[4.5]' '"4"' '[true]'; do check_bad load_failure_codes "\"load_failure_codes\": $v"; done
check_bad nan_codes '"nan_codes": [256]'
check_bad higher_is_better '"higher_is_better": 1'
check_bad "inject must be an object" '"inject": "flips"'
check_bad "golden must be an object" '"golden": "golden.json"'
check_bad "golden must be an object" '"golden": 3'
check_bad "inject.flipz" '"inject": {"flipz": 2}'
check_bad "golden.sumary" '"golden": {"sumary": "g.json"}'
check_bad "inject.include" '"inject": {"include": "/model/*"}'
check_bad "inject.as" '"inject": {"as": "f64"}'
check_bad "inject.role" '"inject": {"role": 3}'
check_bad name '"name": 7'
check_bad "golden.final_checkpoint needs golden.summary" '"golden": {"final_checkpoint": "x.h5"}'

# 2. Far more planned trials than memory: -5 must not wrap to 2^64 - 5, nor 1e15 be listed up
#    front (7-8 GB within seconds). 1e15 planned trials with --max-trials 3 run 3 trials in bounded
#    memory (the address space is capped at 2 GiB here).
config "$T/huge.json" '"trials": 1e15'
( ulimit -v 2000000; exec timeout 60 "$FLIP" campaign "$T/huge.json" --out "$T/huge" --max-trials 3 -q ) > "$T/stdout" 2> "$T/stderr" \
  || fail "1e15 planned trials with --max-trials 3: exit $? :: $(cat "$T/stderr")"
[ "$(n_records "$T/huge")" = 3 ] || fail "1e15 planned trials with --max-trials 3 recorded $(n_records "$T/huge") trials, not 3"
grep -q "1000000000000000 trials, 3 already done" <(timeout 60 "$FLIP" campaign "$T/huge.json" --out "$T/huge" --max-trials 1 -q) \
  || fail "the resumed 1e15-trial campaign does not count its 3 finished trials"

# 3. --shard edge cases (decimal i/n with 0 <= i < n) and --seed of fit.
config "$T/ok.json" '"trials": 4'
for s in 0/0 3/2 -1/2 +0/1 -0/1 ' 1/2' 0/1/2 a/b 1 '' 0/18446744073709551616; do
  expect_err 2 "--shard" "$FLIP" campaign "$T/ok.json" --out "$T/shard-out" --shard "$s" -q
done
[ ! -e "$T/shard-out" ] || fail "a refused --shard left an output directory"
expect_rc 0 "$FLIP" campaign "$T/ok.json" --out "$T/ok" --shard 1/2 -q
[ "$(n_records "$T/ok")" = 2 ] || fail "--shard 1/2 of 4 trials ran $(n_records "$T/ok") trials"

# 4. A trial command that truncates, deletes, garbles or replaces {ckpt} (with a directory, or with
#    a link to the user's golden file): the work copy is restored from golden, the trial recorded,
#    the campaign goes on; the golden checkpoint is never touched.
DAMAGE='case $(({trial} % 5)) in 0) : > {ckpt};; 1) rm -f {ckpt};; 2) echo garbage > {ckpt};; 3) ln -sf '"$T/g.h5"' {ckpt}.l; mv -f {ckpt}.l {ckpt};; 4) rm -f {ckpt}; mkdir {ckpt};; esac; '"$OK"
config "$T/damage.json" '"trials": 10' "if [ {trial} = golden ]; then $OK; exit 0; fi; $DAMAGE"
expect_rc 0 "$FLIP" campaign "$T/damage.json" --out "$T/damage" -q
$PY - "$T/damage" <<'PYEOF' || fail "records of trials that damaged {ckpt}"
import json, sys, glob
recs = [json.loads(l) for f in glob.glob(sys.argv[1] + "/results/*.jsonl") for l in open(f)]
assert sorted(r["trial"] for r in recs) == list(range(10)), [r["trial"] for r in recs]
for r in recs:
    assert r["restore"] == "recopied" and "{ckpt}" in r["note"] and r["class"] == "masked", r
PYEOF
[ "$(sha "$T/g.h5")" = "$GOLDEN_SHA" ] || fail "the golden checkpoint changed"

# 5. kill -9 of the campaign while a trial (sh with a background child) runs: the trial's whole
#    process group dies with it; nothing writes its marker after the kill.
SLOW="if [ {trial} = golden ]; then $OK; exit 0; fi; echo \$\$ > $T/started; (sleep 2; touch $T/marker-child) & sleep 2; touch $T/marker; wait"
config "$T/slow.json" '"trials": 3' "$SLOW"
"$FLIP" campaign "$T/slow.json" --out "$T/slow" -q > /dev/null 2>&1 &
CAMPAIGN_PID=$!
for _ in $(seq 200); do [ -s "$T/started" ] && break; sleep 0.05; done
if [ -s "$T/started" ]; then
  PGID=$(ps -o pgid= -p "$(cat "$T/started")" | tr -d ' ')
  kill -9 "$CAMPAIGN_PID"
  wait "$CAMPAIGN_PID" 2> /dev/null
  CAMPAIGN_PID=
  sleep 3
  [ -z "$PGID" ] || [ -z "$(pgrep -g "$PGID")" ] || fail "processes of the killed campaign's trial still run: $(pgrep -a -g "$PGID")"
  [ ! -e "$T/marker" ] && [ ! -e "$T/marker-child" ] || fail "the trial kept running after kill -9 of the campaign (marker written)"
else
  fail "the slow trial never started"
fi

# 6. Two processes on the same shard of one directory: the second is refused (exit 2), the first
#    finishes with every trial recorded once.
LOCKED="if [ {trial} = golden ]; then $OK; exit 0; fi; touch $T/lock-started; sleep 1; $OK"
config "$T/lock.json" '"trials": 2' "$LOCKED"
"$FLIP" campaign "$T/lock.json" --out "$T/lock" -q > /dev/null 2>&1 &
CAMPAIGN_PID=$!
for _ in $(seq 200); do [ -e "$T/lock-started" ] && break; sleep 0.05; done
expect_err 2 "already running" "$FLIP" campaign "$T/lock.json" --out "$T/lock" -q
wait "$CAMPAIGN_PID" || fail "the first campaign failed after a second one was refused"
CAMPAIGN_PID=
[ "$(n_records "$T/lock")" = 2 ] || fail "two processes on one shard: $(n_records "$T/lock") records, not 2"

# 7. Inputs inside what the campaign writes or deletes; --out that is a file.
mkdir -p "$T/inside/work/shard-0-of-1"
cp "$T/g.h5" "$T/inside/work/shard-0-of-1/g.h5"
$PY - "$T/inside.json" "$T/inside/work/shard-0-of-1/g.h5" <<'PYEOF'
import json, sys
json.dump({"checkpoint": sys.argv[2], "command": "true", "trials": 2}, open(sys.argv[1], "w"))
PYEOF
expect_err 2 "use another --out" "$FLIP" campaign "$T/inside.json" --out "$T/inside" -q
[ "$(sha "$T/inside/work/shard-0-of-1/g.h5")" = "$GOLDEN_SHA" ] || fail "a golden checkpoint inside OUT/work was deleted or changed"
cp "$T/g.h5" "$T/golden-copy.h5"
expect_err 2 "not a directory" "$FLIP" campaign "$T/ok.json" --out "$T/golden-copy.h5" -q
[ "$(sha "$T/golden-copy.h5")" = "$GOLDEN_SHA" ] || fail "--out naming a file changed it"

# 8. Results files that are a directory or a FIFO: refused (exit 3), never a hang.
mkdir -p "$T/dir-out/results/shard-0-of-1.jsonl"
expect_err 3 "shard-0-of-1.jsonl" "$FLIP" campaign "$T/ok.json" --out "$T/dir-out" -q
mkdir -p "$T/fifo-out/results"
mkfifo "$T/fifo-out/results/shard-0-of-1.jsonl"
expect_err 3 "shard-0-of-1.jsonl" "$FLIP" campaign "$T/ok.json" --out "$T/fifo-out" -q
mkdir -p "$T/fifo2/results" && mkfifo "$T/fifo2/results/shard-1-of-2.jsonl"
expect_rc 0 "$FLIP" campaign "$T/ok.json" --out "$T/fifo3" -q
cp "$T/fifo3/campaign.json" "$T/fifo2/"
expect_err 3 "shard-1-of-2.jsonl" "$FLIP" report "$T/fifo2" --no-plots

# 9. Records: a garbage line in the middle, a torn last line, a trial id beyond the campaign, an
#    unknown class, a non-integer trial id.
config "$T/rec.json" '"trials": 14'
expect_rc 0 "$FLIP" campaign "$T/rec.json" --out "$T/rec" -q
R="$T/rec/results/shard-0-of-1.jsonl"
cp "$R" "$T/rec.orig"
{ head -n 3 "$T/rec.orig"; echo 'garbage'; tail -n +4 "$T/rec.orig"; } > "$R"
expect_err 4 "shard-0-of-1.jsonl:4" "$FLIP" report "$T/rec" --no-plots
expect_err 4 "shard-0-of-1.jsonl:4" "$FLIP" campaign "$T/rec.json" --out "$T/rec" -q
{ cat "$T/rec.orig"; printf '{"trial": 3, "cla'; } > "$R"
expect_rc 0 "$FLIP" report "$T/rec" --no-plots
grep -q "14/14 trials" "$T/stdout" || fail "a torn last line changed the report: $(head -1 "$T/stdout")"
for bad in '{"trial": 99, "class": "masked"}' '{"trial": -1, "class": "masked"}' '{"trial": 1.5, "class": "masked"}' \
           '{"trial": "x", "class": "masked"}' '{"trial": 20, "class": "mystery"}' '{"trial": 2, "class": 3}'; do
  { cat "$T/rec.orig"; echo "$bad"; } > "$R"
  expect_err 4 "shard-0-of-1.jsonl:15" "$FLIP" report "$T/rec" --no-plots
done
sed 's/"class":"masked"/"class":"mystery"/' "$T/rec.orig" > "$R"
expect_err 4 "mystery" "$FLIP" report "$T/rec" --no-plots
cp "$T/rec.orig" "$R"

# 10. fit: every numeric field of the fault-model file, and --seed / --mbit on the command line.
fm() {  # fm FILE JSON_MEMBERS (added to a valid model)
  $PY - "$1" "$2" <<'PYEOF'
import json, sys
m = {"name": "t", "source": "test", "raw_fit_per_mbit": 10, "raw_fit_per_mbit_range": [5, 20], "exposure": 1.0,
     "patterns": [{"name": "single", "p": 1.0, "campaign_model": "flip", "ecc_corrected": 0, "ecc_detected": 0}]}
extra = json.loads("{" + sys.argv[2] + "}")
for k, v in extra.items():
    if k.startswith("patterns.0."):
        m["patterns"][0][k[len("patterns.0."):]] = v
    else:
        m[k] = v
json.dump(m, open(sys.argv[1], "w"))
PYEOF
}
fm "$T/fm-ok.json" ''
expect_rc 0 "$FLIP" fit --fault-model "$T/fm-ok.json" --results "$T/rec" --seed 1 --draws 100
for bad in '"mbit": -3' '"mbit": "3"' '"mbit": 1e300' '"mbit": true' '"exposure": -0.1' '"exposure": 2' '"exposure": "1"' \
           '"raw_fit_per_mbit": -1' '"raw_fit_per_mbit": 1e308' '"raw_fit_per_mbit": "10"' '"raw_fit_per_mbit_range": [-5, 20]' \
           '"raw_fit_per_mbit_range": [5]' '"raw_fit_per_mbit_range": "5-20"' '"patterns.0.p": true' '"patterns.0.p": -0.5' \
           '"patterns.0.ecc_corrected": 1.5' '"patterns.0.ecc_detected": -1' '"patterns.0.count": -1' '"patterns.0.count": "3"' \
           '"patterns": "single"' '"illustrative": "no"'; do
  fm "$T/fm-bad.json" "$bad"
  expect_err 2 "$(echo "$bad" | sed 's/^"\([a-z_.0-9]*\)".*/\1/; s/^patterns\.0\./patterns\\[0\\]\\./')" \
    "$FLIP" fit --fault-model "$T/fm-bad.json" --results "$T/rec" --seed 1 --draws 100
  ! grep -q -- "-[0-9]" "$T/stdout" || fail "fit printed a negative rate for $bad"
done
for s in -1 18446744073709551616 1.5 ''; do
  expect_err 2 "--seed" "$FLIP" fit --fault-model "$T/fm-ok.json" --results "$T/rec" --seed "$s" --draws 100
done
for m in nan -3 inf; do
  expect_err 2 "--mbit" "$FLIP" fit --fault-model "$T/fm-ok.json" --results "$T/rec" --mbit "$m" --draws 100
done

# 11. report and fit outputs over their own inputs (they would replace campaign.json, a results file,
#     the fault model), two outputs on one file, a .jsonl written into results/ (read back as records):
#     exit 2 naming the option, every input unchanged.
cp "$T/rec/campaign.json" "$T/rec.campaign"
sums() { for f in "$T/rec/campaign.json" "$T/rec/golden.json" "$R" "$T/fm-ok.json"; do sha "$f"; done; }
BEFORE=$(sums)
ln -sf "$T/rec/campaign.json" "$T/campaign-link.json"
expect_err 2 "--json" "$FLIP" report "$T/rec" --no-plots --json "$T/rec/campaign.json"
expect_err 2 "--json" "$FLIP" report "$T/rec" --no-plots --json "$T/campaign-link.json"
expect_err 2 "--markdown" "$FLIP" report "$T/rec" --no-plots --markdown "$T/rec/golden.json"
expect_err 2 "--records" "$FLIP" report "$T/rec" --no-plots --records "$R"
expect_err 2 "--records" "$FLIP" report "$T/rec" --no-plots --records "$T/rec/results/merged.jsonl"
expect_err 2 "--markdown" "$FLIP" report "$T/rec" --no-plots --json "$T/same" --markdown "$T/same"
expect_err 2 "--json" "$FLIP" fit --fault-model "$T/fm-ok.json" --results "$T/rec" --seed 1 --draws 10 --json "$T/fm-ok.json"
expect_err 2 "--json" "$FLIP" fit --fault-model "$T/fm-ok.json" --results "$T/rec" --seed 1 --draws 10 --json "$R"
[ "$(sums)" = "$BEFORE" ] || fail "a refused report/fit output changed an input"
[ ! -e "$T/same" ] && [ ! -e "$T/rec/results/merged.jsonl" ] || fail "a refused report wrote an output"
expect_rc 0 "$FLIP" report "$T/rec" --no-plots --json "$T/rec/report.json" --records "$T/merged.jsonl"

# 12. Records of another campaign in results/: another seed, or the same trial with other results.
#     A merged copy of the same records is harmless (counted once).
cp "$T/merged.jsonl" "$T/rec/results/copy.jsonl"
expect_rc 0 "$FLIP" report "$T/rec" --no-plots
grep -q "14/14 trials" "$T/stdout" || fail "a copy of the same records changed the count: $(head -1 "$T/stdout")"
sed 's/"seed":[0-9]*/"seed":999/' "$T/rec.orig" > "$T/rec/results/copy.jsonl"
expect_err 4 "seed 999" "$FLIP" report "$T/rec" --no-plots
expect_err 4 "seed 999" "$FLIP" campaign "$T/rec.json" --out "$T/rec" -q
head -n 1 "$T/rec.orig" | sed 's/"class":"[a-z_]*"/"class":"crash"/' > "$T/rec/results/copy.jsonl"
expect_err 4 "shard-0-of-1.jsonl:1" "$FLIP" report "$T/rec" --no-plots
rm "$T/rec/results/copy.jsonl"

# 13. A campaign.json that is JSON but not a campaign description: exit 4 naming it.
for bad in '{}' '{"config": 3}' '{"config": {"trials": "14", "inject": {}}, "space": {}}' '[1]'; do
  echo "$bad" > "$T/rec/campaign.json"
  expect_err 4 "campaign.json" "$FLIP" report "$T/rec" --no-plots
done
cp "$T/rec.campaign" "$T/rec/campaign.json"
$PY - "$T/rec/campaign.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1])); c["config"]["name"] = 7; json.dump(c, open(sys.argv[1], "w"))
PYEOF
expect_err 4 "$T/rec" "$FLIP" report "$T/rec" --no-plots
cp "$T/rec.campaign" "$T/rec/campaign.json"

# 14. A string command (run by /bin/sh -c) with an --out the shell would interpret: refused before
#     anything runs (`$(touch X)` was executed), naming a value the command would really receive. A campaign that failed before its first trial does
#     not tie OUT to its configuration: the corrected one replaces it.
rm -f "$T/PWNED"
expect_err 2 "argv array" "$FLIP" campaign "$T/ok.json" --out "$T/"'q$(touch PWNED)' -q
expect_err 2 "argv array" "$FLIP" campaign "$T/ok.json" --out "$T/q;touch PWNED" -q
expect_err 2 "argv array" "$FLIP" campaign "$T/ok.json" --out "$T/q a" -q
[ ! -e "$T/PWNED" ] && [ ! -e PWNED ] || fail "a string command ran code from --out"
[ ! -e "$T/q a" ] || fail "a refused --out was made (OUT/work, golden.json left behind)"
# The refusal names the path the command would get for {ckpt} (the golden run's work copy), not one
# it never receives.
config "$T/ckpt-cmd.json" '"trials": 2' 'cat {ckpt} > /dev/null; '"$OK"
expect_err 2 "{ckpt} would be $T/q a/work/shard-0-of-1/ckpt/g.h5," "$FLIP" campaign "$T/ckpt-cmd.json" --out "$T/q a" -q
[ ! -e "$T/q a" ] || fail "a refused --out was made (OUT/work, golden.json left behind)"
echo '{"test_accuracy": 0.5}' > "$T/summary.json"
config "$T/argv.json" '"trials": 2, "command": ["cp", "'"$T/summary.json"'", "{out}"]'
expect_rc 0 "$FLIP" campaign "$T/argv.json" --out "$T/q a" -q
[ "$(n_records "$T/q a")" = 2 ] || fail "an argv command with a space in --out recorded $(n_records "$T/q a") trials"
config "$T/broken.json" '"trials": 2' 'exit 1'
expect_err 2 "golden run failed" "$FLIP" campaign "$T/broken.json" --out "$T/fixed" -q
expect_rc 0 "$FLIP" campaign "$T/ok.json" --out "$T/fixed" -q
grep -q "with no trial recorded; it was replaced" "$T/stdout" || fail "replacing a configuration without trials was not reported"
[ "$(n_records "$T/fixed")" = 4 ] || fail "the corrected configuration recorded $(n_records "$T/fixed") trials"
expect_err 2 "another configuration: command" "$FLIP" campaign "$T/broken.json" --out "$T/fixed" -q

# 15. The golden checkpoint changed under a campaign: its later trials would be drawn from other
#     bytes and classified against the old golden result. Exit 7 naming it; restored, it goes on.
#     A campaign.json without the recorded bytes (older resil) gets them at its next run.
cp "$T/g.h5" "$T/g2.h5"
$PY - "$T/g2.json" "$T/g2.h5" <<'PYEOF'
import json, sys
json.dump({"checkpoint": sys.argv[2], "command": r'echo "{\"test_accuracy\": 0.5}" > {out}', "trials": 4, "seed": 5}, open(sys.argv[1], "w"))
PYEOF
expect_rc 0 "$FLIP" campaign "$T/g2.json" --out "$T/g2" --max-trials 2 -q
cp "$T/g2.h5" "$T/g2.orig"
$PY - "$T/g2.h5" <<'PYEOF'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["model/w"][3] = 2.0
PYEOF
expect_err 7 "g2.h5: the golden checkpoint's bytes differ" "$FLIP" campaign "$T/g2.json" --out "$T/g2" -q
[ "$(n_records "$T/g2")" = 2 ] || fail "a campaign ran trials on a changed golden checkpoint"
cp "$T/g2.orig" "$T/g2.h5"
$PY - "$T/g2/campaign.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1])); assert "golden_xxh64" in c, c.keys(); del c["golden_xxh64"]; json.dump(c, open(sys.argv[1], "w"))
PYEOF
expect_rc 0 "$FLIP" campaign "$T/g2.json" --out "$T/g2" --max-trials 1 -q
grep -q golden_xxh64 "$T/g2/campaign.json" || fail "the golden bytes were not recorded into an older campaign.json"
expect_rc 0 "$FLIP" campaign "$T/g2.json" --out "$T/g2" -q
[ "$(n_records "$T/g2")" = 4 ] || fail "the restored campaign recorded $(n_records "$T/g2") trials, not 4"

# 16. fit with one campaign twice (also through another spelling or a copy of its directory): its
#     trials counted twice. Two campaigns of one model with other seeds are pooled, and it says so.
expect_err 2 "same campaign" "$FLIP" fit --fault-model "$T/fm-ok.json" --results "$T/rec" --results "$T/rec/." --seed 1 --draws 10
cp -r "$T/rec" "$T/rec-copy"
expect_err 2 "same fault sites" "$FLIP" fit --fault-model "$T/fm-ok.json" --results "$T/rec" --results "$T/rec-copy" --seed 1 --draws 10
config "$T/rec2.json" '"trials": 5, "seed": 77'
expect_rc 0 "$FLIP" campaign "$T/rec2.json" --out "$T/rec2" -q
expect_rc 0 "$FLIP" fit --fault-model "$T/fm-ok.json" --results "$T/rec" --results "$T/rec2" --seed 1 --draws 10
grep -q "pooled with the earlier --results of model flip (19 trials in all)" "$T/stdout" || fail "two campaigns of one model were not pooled: $(cat "$T/stdout")"
# A missing campaign directory is exit 3 (io), like every missing input, naming it.
expect_err 3 "nope/campaign.json" "$FLIP" report "$T/nope" --no-plots
expect_err 3 "nope/campaign.json" "$FLIP" fit --fault-model "$T/fm-ok.json" --results "$T/nope" --seed 1 --draws 10

# 17. report --markdown in a directory whose name the shell would run ($(...), quotes): the plot
#     script runs without a shell. Plots (plot-*.png beside the markdown) never replace another
#     output or, through a link, an input.
rm -f PWNED "$T/PWNED"
QD="$T/q'\$(touch PWNED)'"
mkdir -p "$QD"
expect_rc 0 "$FLIP" report "$T/rec" --markdown "$QD/r.md"
[ ! -e PWNED ] && [ ! -e "$T/PWNED" ] || fail "report --markdown ran code from its path"
grep -q "plots)" "$T/stdout" && [ -s "$QD/plot-classes.png" ] || fail "no plots beside a markdown in a quoted directory: $(cat "$T/stdout")"
mkdir -p "$T/pl" "$T/pl2"
expect_err 2 "would be replaced by a plot" "$FLIP" report "$T/rec" --json "$T/pl/plot-classes.png" --markdown "$T/pl/r.md"
ln -sf "$T/rec/campaign.json" "$T/pl2/plot-classes.png"
BEFORE=$(sha "$T/rec/campaign.json")
expect_err 2 "plot-classes.png" "$FLIP" report "$T/rec" --markdown "$T/pl2/r.md"
[ "$(sha "$T/rec/campaign.json")" = "$BEFORE" ] || fail "a plot was written through a link onto campaign.json"
# A refused later plot (plot-bits.png, drawn after plot-classes.png) leaves none moved.
mkdir -p "$T/pl3/plot-bits.png"
expect_err 3 "plot-bits.png" "$FLIP" report "$T/rec" --markdown "$T/pl3/r.md"
[ ! -e "$T/pl3/plot-classes.png" ] || fail "a plot was moved before a later one was refused"

# 18. Foreign records with the campaign's own seed (a shard file of another campaign: same default
#     seed, other configuration) are refused by the configuration identity each record carries; a
#     campaign renamed (or with another trial count) draws the same sites: fit refuses pooling it.
config "$T/other.json" '"trials": 14, "seed": 1, "inject": {"role": "optimizer"}'
expect_rc 0 "$FLIP" campaign "$T/other.json" --out "$T/other" --shard 1/2 -q
config "$T/mine.json" '"trials": 14, "seed": 1'
expect_rc 0 "$FLIP" campaign "$T/mine.json" --out "$T/mine" --shard 0/2 -q
cp "$T/other/results/shard-1-of-2.jsonl" "$T/mine/results/"
expect_err 4 "belongs to campaign" "$FLIP" report "$T/mine" --no-plots
rm "$T/mine/results/shard-1-of-2.jsonl"
config "$T/renamed.json" '"trials": 6, "seed": 1, "name": "renamed"'
expect_rc 0 "$FLIP" campaign "$T/renamed.json" --out "$T/renamed" -q
expect_err 2 "same fault sites" "$FLIP" fit --fault-model "$T/fm-ok.json" --results "$T/mine" --results "$T/renamed" --seed 1 --draws 10

# 19. Records without a readable campaign.json: another configuration must not adopt them.
rm "$T/renamed/campaign.json"
expect_err 2 "no readable campaign.json" "$FLIP" campaign "$T/other.json" --out "$T/renamed" -q
echo '{not json' > "$T/renamed/campaign.json"
expect_err 2 "no readable campaign.json" "$FLIP" campaign "$T/other.json" --out "$T/renamed" -q
expect_err 4 "campaign.json: not JSON" "$FLIP" report "$T/renamed" --no-plots

# 20. The golden checkpoint changed after a configuration failed before its first trial: nothing
#     was drawn from the old bytes, so the directory is taken over (not a dead end, exit 7).
cp "$T/g.h5" "$T/g3.h5"
$PY - "$T/g3-bad.json" "$T/g3-ok.json" "$T/g3.h5" <<'PYEOF'
import json, sys
ok = r'echo "{\"test_accuracy\": 0.5}" > {out}'
json.dump({"checkpoint": sys.argv[3], "command": "test -e " + sys.argv[3] + ".fixed && " + ok, "trials": 2}, open(sys.argv[1], "w"))
PYEOF
expect_err 2 "golden run failed" "$FLIP" campaign "$T/g3-bad.json" --out "$T/g3" -q
$PY - "$T/g3.h5" <<'PYEOF'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["model/w"][0] = 3.0
PYEOF
touch "$T/g3.h5.fixed"
expect_rc 0 "$FLIP" campaign "$T/g3-bad.json" --out "$T/g3" -q
[ "$(n_records "$T/g3")" = 2 ] || fail "a campaign whose checkpoint changed before its first trial did not run"

# 21. A pattern table that is not a regular file (a FIFO blocked the campaign forever): exit 3
#     naming it, before OUT is made.
mkfifo "$T/pf"
config "$T/pf.json" "\"trials\": 2, \"inject\": {\"model\": \"pattern:$T/pf\"}"
expect_err 3 "$T/pf" "$FLIP" campaign "$T/pf.json" --out "$T/pf-out" -q
[ ! -e "$T/pf-out" ] || fail "a refused pattern table left an output directory"
expect_err 3 "$T/pf" "$FLIP" plan "$T/pf.json"

# 22. A campaign continued from another working directory, its configuration given by a relative
#     or an absolute path: the paths in it are relative to the configuration file, so it is the
#     same configuration (refused as "another configuration" when campaign.json held them relative
#     to the first run's working directory). So is a campaign.json holding relative paths, written
#     by a run in the configuration's directory; its records keep its identity.
mkdir -p "$T/cwd/A" "$T/cwd/B"
cp "$T/g.h5" "$T/cwd/A/golden.h5"
$PY - "$T/cwd/A" <<'PYEOF'
import json, sys
c = {"name": "h", "checkpoint": "golden.h5", "command": r'echo "{\"test_accuracy\": 0.5}" > {out}', "trials": 8, "seed": 3,
     "inject": {"include": ["/model/w"]}}
json.dump(c, open(sys.argv[1] + "/c.json", "w"))
c["checkpoint"] = "other.h5"
json.dump(c, open(sys.argv[1] + "/c2.json", "w"))
PYEOF
(cd "$T/cwd/A" && expect_rc 0 "$FLIP" campaign c.json --out out --max-trials 2 --jobs 1 -q) || exit 1
(cd "$T/cwd/B" && expect_rc 0 "$FLIP" campaign ../A/c.json --out ../A/out --max-trials 2 -q) || exit 1
(cd / && expect_rc 0 "$FLIP" campaign "$T/cwd/A/c.json" --out "$T/cwd/A/out" --max-trials 2 -q) || exit 1
[ "$(n_records "$T/cwd/A/out")" = 6 ] || fail "a campaign continued from other directories recorded $(n_records "$T/cwd/A/out") trials, not 6"
expect_rc 0 "$FLIP" report "$T/cwd/A/out" --no-plots
grep -q "6/8 trials" "$T/stdout" || fail "the continued campaign's report: $(head -1 "$T/stdout")"
# Another file with the same bytes is still another configuration.
cp "$T/cwd/A/golden.h5" "$T/cwd/A/other.h5"
expect_err 2 "another configuration: checkpoint" "$FLIP" campaign "$T/cwd/A/c2.json" --out "$T/cwd/A/out" -q
$PY - "$T/cwd/A/out" <<'PYEOF'
import json, sys, glob
d = sys.argv[1]
c = json.load(open(d + "/campaign.json"))
assert c["config"]["checkpoint"].startswith("/"), c["config"]["checkpoint"]
c["config"]["checkpoint"] = "golden.h5"  # a relative path, as written by a run in A
json.dump(c, open(d + "/campaign.json", "w"), indent=2)
for f in glob.glob(d + "/results/*.jsonl"):
    recs = [json.loads(l) for l in open(f)]
    for r in recs:
        r.pop("campaign", None)  # the identity is that of the configuration campaign.json holds
    open(f, "w").write("".join(json.dumps(r) + "\n" for r in recs))
PYEOF
OLD_META=$(sha "$T/cwd/A/out/campaign.json")
(cd "$T/cwd/B" && expect_rc 0 "$FLIP" campaign ../A/c.json --out ../A/out --max-trials 1 -q) || exit 1
(cd / && expect_rc 0 "$FLIP" campaign "$T/cwd/A/c.json" --out "$T/cwd/A/out" -q) || exit 1
[ "$(sha "$T/cwd/A/out/campaign.json")" = "$OLD_META" ] || fail "a campaign.json with relative paths was rewritten"
expect_rc 0 "$FLIP" report "$T/cwd/A/out" --no-plots
grep -q "8/8 trials" "$T/stdout" || fail "the campaign with relative paths, continued: $(head -1 "$T/stdout")"

# 23. The configuration file inside what the campaign writes (OUT/campaign.json would be replaced by
#     the campaign's own; in results/ or as golden.json it would be read back as records or as the
#     golden record): exit 2 naming it, before anything in OUT is made or changed; the file unchanged.
for at in campaign.json results/c.jsonl golden.json work/c.json; do
  rm -rf "$T/cfg-in"
  mkdir -p "$(dirname "$T/cfg-in/$at")"
  config "$T/cfg-in/$at" '"trials": 2'
  SUM=$(sha "$T/cfg-in/$at")
  TREE=$(cd "$T/cfg-in" && find . | sort)
  expect_err 2 "$at" "$FLIP" campaign "$T/cfg-in/$at" --out "$T/cfg-in" -q
  (cd "$T/cfg-in" && expect_err 2 "$at" "$FLIP" campaign "$at" --out . -q) || exit 1
  [ "$(sha "$T/cfg-in/$at")" = "$SUM" ] || fail "the configuration at OUT/$at changed"
  [ "$(cd "$T/cfg-in" && find . | sort)" = "$TREE" ] || fail "a configuration at OUT/$at: OUT changed: $(cd "$T/cfg-in" && find . | sort)"
done
ln -s "$T/cfg-in/work/c.json" "$T/cfg-link.json"
expect_err 2 "use another --out" "$FLIP" campaign "$T/cfg-link.json" --out "$T/cfg-in" -q
[ "$(cd "$T/cfg-in" && find . | sort)" = "$TREE" ] || fail "a configuration linked from OUT/work: OUT changed"

# 24. A gzip-chunked HDF5 golden: inject and revert rewrite its chunks in a staged copy renamed over
#     the file. That is not the command replacing {ckpt} (no such note), and a reverted file that
#     HDF5 left larger than golden (a rewritten chunk is placed anew) is copied again: the work copy
#     does not grow from trial to trial.
$PY - "$T/gz.h5" "$T/gz.json" "stat -c %s {ckpt} >> $T/gz-sizes; $OK" <<'PYEOF'
import json, sys, h5py, numpy as np
w = (np.random.default_rng(1).standard_normal(16384) * 0.01).astype(np.float32)
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("model/w", data=w, chunks=(1024,), compression="gzip")
json.dump({"checkpoint": sys.argv[1], "command": sys.argv[3], "timeout_s": 60, "trials": 24, "inject": {"flips": 1}}, open(sys.argv[2], "w"))
PYEOF
GZ_SHA=$(sha "$T/gz.h5")
expect_rc 0 "$FLIP" campaign "$T/gz.json" --out "$T/gz" --jobs 1 --keep-work -q
$PY - "$T/gz" "$T/gz.h5" "$T/gz-sizes" <<'PYEOF' || fail "a campaign on a gzip-chunked HDF5 file"
import glob, json, os, sys
recs = [json.loads(l) for f in glob.glob(sys.argv[1] + "/results/*.jsonl") for l in open(f)]
assert len(recs) == 24, len(recs)
for r in recs:
    assert "{ckpt}" not in r["note"] and r["restore"] in ("reverted", "recopied"), r
golden = os.path.getsize(sys.argv[2])
work = glob.glob(sys.argv[1] + "/work/*/ckpt/gz.h5")
assert work and all(os.path.getsize(w) == golden for w in work), (golden, [os.path.getsize(w) for w in work])
sizes = [int(l) for l in open(sys.argv[3])]  # what each trial's command saw: golden plus at most a few chunks
assert max(sizes) < golden + 4 * 4096, (golden, sizes)
PYEOF
[ "$(sha "$T/gz.h5")" = "$GZ_SHA" ] || fail "the gzip-chunked golden checkpoint changed"

[ "$(sha "$T/g.h5")" = "$GOLDEN_SHA" ] || fail "the golden checkpoint changed"
echo "all hostile campaign checks passed"
