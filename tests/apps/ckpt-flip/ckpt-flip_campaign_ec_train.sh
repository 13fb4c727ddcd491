#!/bin/bash
# ckpt-flip campaign of kind ec-train: every trial a real 4-rank ec-train job (mpiexec) with in-memory
# flips drawn from the trial's seed, classified against the fault-free job's state_hash and loss.
# 1. --scrub, targets row and mlp, run in two slices (--max-trials, then the rest: resume): a row flip
#    is repaired by the scrub and the run ends in the golden state (bit_masked, the repair's step after
#    the flip's); an MLP flip escapes (another state_hash, the replicas diverged); each record's flip is
#    its flip log's, at the step the campaign drew; `report` reads the records.
# 2. The same configuration with the golden report given (golden.summary) in another directory draws
#    the same flip for trial 0: the draws depend on the seed and the trial only.
# 3. Two members of one codeword flipped (target stripe, m = 1): exit 8, class detected, the scrub's
#    error line in the record.
# 4. Without --scrub a row flip ends in exit 8 (parity differs from the data at the end): detected by
#    the default detected_codes, its one error line in the record, the report written and the
#    segments removed by ec-train itself. No run of the test leaves a segment in /dev/shm.
# 5. Bad configurations: one error line naming the key, exit 2, before anything runs.
#    A trial ec-train refuses (exit 2: target parity of a job without --ft ec) stops the campaign.
# 6. kill -9 of the campaign during a trial leaves that job's segments; the same command removes them
#    before its first run (never attached as a relaunch): the records of an uninterrupted run.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-ec-train
FLIP=$1 EC=$2 MPIEXEC=$3
segments() { ls /dev/shm 2> /dev/null | grep '^resil-ec-campaign-' | sort; }
segments > "$T/shm.before"
S='"--tables", "4", "--rows", "300", "--dim", "8", "--batch", "48", "--rows-per-fragment", "4", "--seed", "11", "--steps", "12", "--poll-us", "200", "--ft", "ec"'
config() {  # config FILE K M EXTRA-ARGS-JSON INJECT-JSON [MORE-KEYS]
  printf '%s\n' '{"name": "ec", "kind": "ec-train", "command": ["'"$MPIEXEC"'", "-n", "4", "'"$EC"'", '"$S"', "--k", "'"$2"'", "--m", "'"$3"'"'"$4"', "--report", "{out}"],' \
    ' "trials": 4, "seed": 5, "timeout_s": 120, "inject": '"$5${6:-}"'}' > "$T/$1"
}

# 1. Rows repaired, MLP replicas escaping; resumed after two trials.
config a.json 3 1 ', "--scrub"' '{"targets": ["row", "mlp"], "steps": [3, 8]}'
run "$FLIP" campaign "$T/a.json" --out "$T/a" --jobs 1 --max-trials 2
run "$FLIP" campaign "$T/a.json" --out "$T/a" --jobs 1
grep -q "4 trials, 2 already done, 2 run now" "$T/stdout" || { cat "$T/stdout"; fail "the second slice did not resume"; }
$PY - "$T/a" <<'PY' || fail "records of a"
import glob, json, os, re, sys
out = sys.argv[1]
recs = sorted((json.loads(l) for f in glob.glob(os.path.join(out, "results", "*.jsonl")) for l in open(f)), key=lambda r: r["trial"])
golden = json.load(open(os.path.join(out, "golden.json")))
assert [r["trial"] for r in recs] == [0, 1, 2, 3], recs
gstate = golden["summary"]["state_hash"]
assert golden["final_weights_xxh64"] == gstate, golden
for r in recs:
    e, f = r["ec_train"], r["flips"]
    target = "row" if r["trial"] % 2 == 0 else "mlp"
    assert r["stratum"] == target and r["strata"]["role"] == target, r
    assert r["n_flips"] == 1 and f[0]["target"] == target, r
    step = int(re.fullmatch(target + r"@(\d+)", e["inject"]).group(1))
    assert 3 <= step <= 8 and f[0]["step"] == step, (step, f)
    assert r["restore"] == "none" and r["golden_metric"] == golden["summary"]["final_loss"], r
    assert e["golden_state_hash"] == gstate and e["segments_removed"] == 0, e  # a completed run removes its own
    assert len(e["injections"]) == 1 and e["injections"][0]["step"] == step, e
    if target == "row":
        assert f[0]["dataset"].startswith("/embedding/table"), f
        assert r["class"] == "bit_masked" and e["state_hash"] == gstate and r["delta"] == 0, r
        assert e["injections"][0]["repaired_step"] >= step and e["repaired"]["data"] >= 1, e
        rep = e["repairs"][0]  # the row the scrub repaired is the flipped one
        assert (rep["step"], rep["stripe"], rep["member"], rep["row"]) == (e["injections"][0]["repaired_step"], f[0]["stripe"], f[0]["member"], f[0]["member_row"]), (rep, f)
    else:
        assert re.match(r"/rank%d/model/" % f[0]["rank"], f[0]["dataset"]), f
        assert r["class"] in ("masked", "tolerable_sdc", "critical_sdc"), r
        assert e["state_hash"] != gstate and e["replicas_diverged"] is True, e
print("ok:", [(r["trial"], r["stratum"], r["class"], r["ec_train"]["inject"]) for r in recs])
PY
run "$FLIP" report "$T/a" --json "$T/a-report.json"
$PY -c 'import json, sys; c = json.load(open(sys.argv[1]))["overall"]["classes"]; assert c["bit_masked"]["x"] == 2 and c["detected"]["x"] == 0, c' \
  "$T/a-report.json" || fail "report of a"
# same_records A B [TRIAL...]: two campaign directories hold the same records but for times (with trials
# named: exactly those trials, and output tails left out: a tail names the job id, of another directory).
same_records() {
  $PY - "$@" <<'PY'
import glob, json, os, sys
def records(d):
    rs = {}
    for line in open(glob.glob(os.path.join(d, "results", "*.jsonl"))[0]):
        r = json.loads(line)
        for k in ("wall_seconds", "cpu_seconds", "output_tail") if sys.argv[3:] else ("wall_seconds", "cpu_seconds"):
            r.pop(k, None)
        for i in r["ec_train"]["injections"]:
            i.pop("flip_to_repair_s", None)
        for i in r["ec_train"]["repairs"] or []:
            del i["t"]
        rs[r["trial"]] = r
    return rs
a, b = records(sys.argv[1]), records(sys.argv[2])
if sys.argv[3:]:
    want = sorted(int(t) for t in sys.argv[3:])
    assert sorted(a) == sorted(b) == want, (sorted(a), sorted(b))
assert a == b, [(t, a[t], b.get(t)) for t in a if a[t] != b.get(t)]
PY
}
# Two jobs at once (each trial its own job id): the records of the serial run, but for the times.
run "$FLIP" campaign "$T/a.json" --out "$T/a-jobs" --jobs 2
same_records "$T/a" "$T/a-jobs" || fail "--jobs 2 gave other records"

# 2. The golden report given, another directory: trial 0 draws the same flip.
$PY -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))["summary"], open(sys.argv[2], "w"))' "$T/a/golden.json" "$T/golden-report.json"
config a2.json 3 1 ', "--scrub"' '{"targets": ["row", "mlp"], "steps": [3, 8]}' ', "golden": {"summary": "golden-report.json"}'
run "$FLIP" campaign "$T/a2.json" --out "$T/a2" --jobs 1 --max-trials 1
$PY - "$T/a" "$T/a2" <<'PY' || fail "trial 0 drew another flip from the same seed"
import glob, json, os, sys
first = [json.loads(open(glob.glob(os.path.join(d, "results", "*.jsonl"))[0]).readline()) for d in sys.argv[1:]]
assert first[0]["trial"] == first[1]["trial"] == 0
assert first[0]["flips"] == first[1]["flips"] and first[0]["class"] == first[1]["class"] == "bit_masked", first
PY

# 3. Beyond repair: exit 8, detected.
config b.json 3 1 ', "--scrub"' '{"targets": ["stripe"], "steps": [4, 4]}' ', "trials": 1'
sed -i 's/"trials": 4, //' "$T/b.json"
run "$FLIP" campaign "$T/b.json" --out "$T/b" --jobs 1
$PY - "$T/b" <<'PY' || fail "records of b"
import glob, json, os, sys
r = json.loads(open(glob.glob(os.path.join(sys.argv[1], "results", "*.jsonl"))[0]).readline())
assert r["class"] == "detected" and r["exit_code"] == 8, r
assert "more corrupt or lost members than m = 1 can repair" in r["output_tail"], r["output_tail"]
assert "can repair" in r["ec_train"]["unrepairable"] and r["ec_train"]["state_hash"] is None, r["ec_train"]
assert r["n_flips"] == 2 and {f["target"] for f in r["flips"]} == {"stripe"}, r["flips"]
PY

# 4. No scrub: the parity found different at the end is exit 8.
config c.json 3 1 '' '{"targets": ["row"], "steps": [4, 4]}' ', "trials": 1'
sed -i 's/"trials": 4, //' "$T/c.json"
run "$FLIP" campaign "$T/c.json" --out "$T/c" --jobs 1
$PY - "$T/c" <<'PY' || fail "records of c"
import glob, json, os, sys
r = json.loads(open(glob.glob(os.path.join(sys.argv[1], "results", "*.jsonl"))[0]).readline())
assert r["class"] == "detected" and r["exit_code"] == 8, r
assert "parity fragment(s) differ from a fresh encode of the data at the end" in r["output_tail"], r["output_tail"]
assert r["ec_train"]["segments_removed"] == 0, r["ec_train"]
PY
# 6. kill -9 of the campaign mid-trial: the job dies with it (its supervisor kills the group) but its
#    segments stay; the same command then removes them before its first run, never attaching
#    them as a relaunch: its records are those of a campaign never stopped.
config d.json 3 1 ', "--scrub"' '{"targets": ["row", "mlp"], "steps": [3, 8]}' ', "trials": 2'
sed -i 's/"trials": 4, //; s/"--steps", "12"/"--steps", "60"/' "$T/d.json"
run "$FLIP" campaign "$T/d.json" --out "$T/d-ref" --jobs 1
on_exit() { [ -n "${CAMPAIGN_PID:-}" ] && kill -9 "$CAMPAIGN_PID" 2> /dev/null; }
"$FLIP" campaign "$T/d.json" --out "$T/d" --jobs 1 > "$T/d.log" 2>&1 &
CAMPAIGN_PID=$!
job=
for _ in $(seq 2400); do  # the golden run names its job: campaign-<hash of the work directory>-golden
  job=$(grep -o 'campaign-[0-9a-f]*-golden' "$T/d/golden.log" 2> /dev/null | head -1)
  [ -n "$job" ] && ls /dev/shm 2> /dev/null | grep -q "^resil-ec-${job%golden}[0-9]*-0$" && break
  kill -0 "$CAMPAIGN_PID" 2> /dev/null || break
  sleep 0.01
done
left=$(ls /dev/shm 2> /dev/null | grep "^resil-ec-${job%golden}[0-9]*-[0-9]*$")
[ -n "$job" ] && [ -n "$left" ] || { cat "$T/d.log"; fail "no trial of d was running to kill"; }
kill -9 "$CAMPAIGN_PID"
wait "$CAMPAIGN_PID" 2> /dev/null
CAMPAIGN_PID=
gone "$T/d/" || fail "processes of the killed campaign still run: $(pgrep -a -f -- "$T/d/")"
[ -n "$(ls /dev/shm 2> /dev/null | grep "^resil-ec-${job%golden}")" ] || fail "the killed trial left no segment (nothing to test)"
run "$FLIP" campaign "$T/d.json" --out "$T/d" --jobs 1
[ -z "$(ls /dev/shm 2> /dev/null | grep "^resil-ec-${job%golden}")" ] || fail "segments of d left after the resumed campaign"
same_records "$T/d-ref" "$T/d" 0 1 || fail "the resumed campaign's records differ from an uninterrupted one's"

segments > "$T/shm.after"
diff "$T/shm.before" "$T/shm.after" > /dev/null || fail "state segments left in /dev/shm: $(comm -13 "$T/shm.before" "$T/shm.after")"

# 5. Bad configurations.
bad() {  # bad WORD JSON
  printf '%s\n' "$2" > "$T/bad.json"
  expect_err 2 "$1" "$FLIP" campaign "$T/bad.json" --out "$T/bad"
  [ ! -e "$T/bad" ] || fail "a refused configuration made its --out"
}
CMD='["'"$MPIEXEC"'", "-n", "4", "'"$EC"'", "--scrub", "--report", "{out}"]'
bad 'inject.targets: "weights" is not an ec-train target' '{"kind": "ec-train", "command": '"$CMD"', "inject": {"targets": ["weights"]}}'
bad '"checkpoint": a campaign of kind ec-train flips' '{"kind": "ec-train", "checkpoint": "g.h5", "command": '"$CMD"'}'
bad 'must write the ec-train report to {out}' '{"kind": "ec-train", "command": ["'"$MPIEXEC"'", "-n", "4", "'"$EC"'"]}'
bad 'gives --inject-seed, which the campaign sets' '{"kind": "ec-train", "command": ["'"$EC"'", "--inject-seed", "3", "--report", "{out}"]}'
bad 'inject.steps must be' '{"kind": "ec-train", "command": '"$CMD"', "inject": {"steps": [9, 3]}}'
bad 'kind must be one of "checkpoint", "ec-train"' '{"kind": "memory", "command": '"$CMD"'}'
# A target the job cannot have (parity without --ft ec): ec-train's usage error stops the campaign at
# its first trial, which is not recorded, instead of every trial a crash.
config e.json 3 1 '' '{"targets": ["parity"], "steps": [3, 8]}'
sed -i 's/"--ft", "ec"/"--ft", "none"/' "$T/e.json"
expect_err 2 'trial 0: ec-train refused the command with --inject parity@' "$FLIP" campaign "$T/e.json" --out "$T/e" --jobs 1
grep -q 'only --ft ec keeps parity' "$T/stderr" || { cat "$T/stderr"; fail "the error line does not give ec-train's"; }
[ ! -s "$T/e/results/shard-0-of-1.jsonl" ] || fail "the refused trial was recorded"
bad "inject.model 'bogus': unknown fault model" '{"kind": "ec-train", "command": '"$CMD"', "inject": {"model": "bogus"}}'
echo "ok: ec-train campaigns"
