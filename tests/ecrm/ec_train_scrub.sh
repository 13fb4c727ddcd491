#!/usr/bin/env bash
# ec-train --scrub: bit flips in the shard store (--inject) found by the row checksums and repaired
# by the erasure code while training goes on; each repaired run must end with the fault-free run's
# state_hash and parity equal to a fresh encode.
#   ec_train_scrub.sh CASE EC_TRAIN MPIEXEC WORKDIR FLIP_LOG_READ
# CASEs: row (a shard row), parity (a parity row), stripe-m (m members of one codeword: the limit),
# beyond (m + 1 members: exit 8 naming the codeword, the report saying where), beyond-fallback (the
# same with --fallback-ckpt: the newest checkpoint, then the fault-free state), before-delta (a flip
# in a row between its update and its parity delta: repaired; without --scrub the same flip ends in
# another state, so the case can fail), sweep (a row never read again, found by the sweep before the
# end), kill-repair (two flipped rows on one rank, which is killed -9 right after writing the first
# repaired row; relaunched, the second is found and repaired, and the flip log the relaunch
# completed reads as one), log (the flip log's records, read by
# ckpt-flip's reader through FLIP_LOG_READ and by Python's resil.results, which must agree), models
# (--inject-bits and --inject-model: the anchor in the selected field, the fault model's mask),
# replica (a flip in rank 2's MLP replica or Adam state: the report's replica hashes tell the ranks
# apart and the state_hash differs from the fault-free run's, even where rank 0's state does not),
# campaign (a small campaign of bench/ec/scrub_campaign.py: one ec-train run per flip, classified
# against the fault-free state_hash; a row flip under --scrub is repaired, without it detected at the
# end; an MLP flip is never masked), during-rebuild (flips while a failed rank's stripes are rebuilt),
# checkpoint (a flipped row the cadence has not reached is repaired before a checkpoint is written:
# a preempted job's next launch and a fallback end fault-free), usage (bad --scrub and --inject
# settings: one line, exit 2; a missing pattern file and a state too large for memory: exit 3).
set -u
case=$1 bin=$2 mpiexec=$3 dir=$4/scrub-$1 logread=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
run=$here/../../scripts/hpc/ec-train-run.sh
rm -rf "$dir"; mkdir -p "$dir"; cd "$dir" || exit 1
S=(--tables 4 --rows 600 --dim 8 --batch 48 --rows-per-fragment 4 --seed 11 --steps 24 --poll-us 200)
fail() { echo "FAIL: $*" >&2; [ -n "${job:-}" ] && "$bin" --cleanup --job-id "$job" >/dev/null 2>&1; exit 1; }
field() { /usr/bin/python3 -c 'import json,sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): v = v[int(k)] if isinstance(v, list) else v.get(k)
print(v)' "$1" "$2"; }
ref() { "$mpiexec" -n 4 "$bin" "${S[@]}" --k "$1" --m "$2" --ft none --report ref.json >ref.out 2>&1 || fail "reference run: $(cat ref.out)"; }
ec() { "$mpiexec" -n 4 "$bin" "${S[@]}" --ft ec "$@" >run.out 2>&1; }
same() {  # same REPORT: the reference's state_hash, parity verified
  [ "$(field "$1" completed)" = True ] || fail "$1 not completed: $(tail -3 run.out)"
  [ "$(field "$1" state_hash)" = "$(field ref.json state_hash)" ] || fail "state_hash $(field "$1" state_hash) != reference $(field ref.json state_hash)"
  [ "$(field "$1" parity_mismatches)" = 0 ] || fail "parity mismatches"
}
repaired() {  # repaired REPORT KIND N: at least N repairs of KIND, and every injection repaired
  local got; got=$(field "$1" "scrub.repaired.$2")
  [ "$got" -ge "$3" ] || fail "$2 repairs: $got, expected >= $3"
  /usr/bin/python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
bad = [i for i in r["injections"] if i.get("repaired_step") is None or i["repaired_step"] < i["step"]]
sys.exit(1 if bad or not r["injections"] else 0)' "$1" || fail "an injection was not repaired: $(field "$1" injections)"
  echo "ok: $2 repairs $got, state_hash $(field "$1" state_hash)"
}

compare_readers() {  # compare_readers LOG: ckpt-flip's reader and Python's resil.results read the same records
  "$logread" "$1" >cpp.json || fail "ckpt-flip's reader refused $1: $(cat cpp.json)"
  PYTHONPATH=$here/../../python /usr/bin/python3 - "$1" cpp.json <<'PY' || fail "the readers disagree on $1"
import json, sys
from resil import results
log, cpp = results.read_flip_log(sys.argv[1]), json.load(open(sys.argv[2]))
assert cpp["complete"] and log.complete and cpp["seed"] == log.header["seed"] and cpp["model"] == log.header["model"], (cpp, log.header)
assert len(cpp["records"]) == len(log.flips) > 0
for c, p in zip(cpp["records"], log.flips):
    assert (c["dataset"], c["index"], c["nd"], c["dtype"], c["anchor"], c["old"], c["new"], c["mask"]) == \
           (p.dataset, p.index, p.nd, p.dtype, p.anchor, p.old, p.new, p.mask), (c, p)
    assert p.step is not None and p.rank is not None and p.target in ("row", "parity", "stripe", "mlp", "opt"), p
print(f"ok: both readers: {len(log.flips)} records of {sys.argv[1]}")
PY
}

case $case in
  row)
    ref 2 1
    ec --k 2 --m 1 --scrub --inject row@6:rank=1 --report r.json || fail "run: $(tail -3 run.out)"
    same r.json; repaired r.json data 1 ;;
  parity)
    ref 2 2
    ec --k 2 --m 2 --scrub --inject parity@6:rank=2,parity@9:rank=0:bits=3 --report r.json || fail "run: $(tail -3 run.out)"
    same r.json; repaired r.json parity 2 ;;
  stripe-m)
    ref 2 2
    ec --k 2 --m 2 --scrub --inject stripe@6:members=2:stripe=40 --report r.json || fail "run: $(tail -3 run.out)"
    same r.json; repaired r.json data 0
    [ "$(/usr/bin/python3 -c 'import json,sys; r=json.load(open("r.json")); print(len({(q["stripe"],q["member"]) for q in r["scrub"]["repairs"] if q["stripe"]==40}))')" = 2 ] ||
      fail "expected two members of stripe 40 repaired: $(field r.json scrub.repairs)"
    # Two members of codeword (40, row 0), and member 0 at row 1 too: the codeword's two are decoded
    # together from the others, not each from the other corrupt one.
    ec --k 2 --m 2 --scrub --scrub-cadence touched+sweep --scrub-sweep 1000 \
      --inject stripe@6:stripe=40:members=1:member=0:row=0,stripe@6:stripe=40:members=1:member=1:row=0,stripe@6:stripe=40:members=1:member=0:row=1 \
      --report r2.json || fail "run with a codeword's two members and another row of one: $(tail -3 run.out)"
    same r2.json
    echo "ok: m members of one codeword beside another row of one of them" ;;
  beyond)
    ec --k 2 --m 1 --scrub --inject stripe@6:members=2:stripe=40 --report r.json
    rc=$?
    [ $rc = 8 ] || fail "exit $rc, expected 8: $(tail -3 run.out)"
    grep -q "ec-train: error: step [0-9]*: scrub found 1 codeword(s) with more corrupt or lost members than m = 1 can repair: stripe 40 (table 0) row [0-3]: members" run.out ||
      fail "no error line naming the codeword: $(cat run.out)"
    [ "$(grep -c 'ec-train: error:' run.out)" = 1 ] || fail "expected one error line: $(cat run.out)"
    [ "$(field r.json exit_code)" = 8 ] && [ "$(field r.json completed)" = False ] || fail "report: exit_code $(field r.json exit_code)"
    field r.json scrub.unrepairable | grep -q "stripe 40" || fail "report's scrub.unrepairable: $(field r.json scrub.unrepairable)"
    # m + 1 = 2 members of codeword (40, row 0), beside member 0's row 1: still beyond repair.
    ec --k 2 --m 1 --scrub --scrub-cadence touched+sweep --scrub-sweep 1000 \
      --inject stripe@6:stripe=40:members=1:member=0:row=0,stripe@6:stripe=40:members=1:member=1:row=0,stripe@6:stripe=40:members=1:member=0:row=1 \
      --report r2.json
    rc=$?
    [ $rc = 8 ] || fail "interleaved: exit $rc, expected 8: $(tail -3 run.out)"
    grep -q "stripe 40 (table 0) row 0: members 0@rank[0-9],1@rank[0-9] corrupt" run.out || fail "interleaved: $(cat run.out)"
    echo "ok: exit 8, $(grep 'ec-train: error' run.out)" ;;
  beyond-fallback)
    ref 2 1
    ec --k 2 --m 1 --scrub --scrub-cadence touched+sweep --scrub-sweep 1000 --fallback-ckpt --ckpt-interval 4 --ckpt-dir ck \
       --inject stripe@6:members=2:stripe=40 --report r.json || fail "run: $(tail -3 run.out)"
    same r.json
    grep -q "restarting from the newest checkpoint (--fallback-ckpt)" run.out || fail "no fallback line: $(cat run.out)"
    echo "ok: fell back to a checkpoint, state_hash $(field r.json state_hash)" ;;
  before-delta)
    ref 2 1
    ec --k 2 --m 1 --scrub --inject row@6:rank=1:at=delta --report r.json || fail "run: $(tail -3 run.out)"
    same r.json; repaired r.json data 1
    # Without the scrub the same flip is carried into the parity and trained on: another state.
    ec --k 2 --m 1 --inject row@6:rank=1:at=delta --report plain.json || fail "run without --scrub: $(tail -3 run.out)"
    [ "$(field plain.json state_hash)" != "$(field ref.json state_hash)" ] || fail "the flip did not change the unscrubbed run's state" ;;
  sweep)
    # Rows 598 and 599 of table 0 are padding (--rows 598): rows 2 and 3 of member 1 of stripe 74
    # (k = 2, 4 rows a fragment). No step reads them: only a sweep finds a flip there.
    S=("${S[@]/#600/598}")
    ref 2 1
    ec --k 2 --m 1 --scrub --scrub-cadence sweep --scrub-sweep 8 --inject stripe@4:members=1:stripe=74:member=1:row=3 --report r.json ||
      fail "run: $(tail -3 run.out)"
    same r.json; repaired r.json data 0
    [ "$(field r.json injections.0.repaired_step)" -lt 24 ] || fail "the sweep did not find the flip during the run"
    echo "ok: found by the sweep at step $(field r.json injections.0.repaired_step)" ;;
  kill-repair)
    ref 2 1
    job=ctest-scrub-$$
    "$run" -n 4 --ec-train "$bin" --max-restarts 2 -- "${S[@]}" --k 2 --m 1 --ft ec --job-id "$job" --scrub --scrub-cadence touched+sweep \
      --scrub-sweep 1000 --inject row@6:rank=1,row@6:rank=1 --kill 1@6:scrub --inject-log flips.jsonl --report r.json >run.out 2>&1 ||
      fail "launcher: $(tail -5 run.out)"
    [ "$(field r.json relaunches)" = 1 ] || fail "expected one relaunch: $(field r.json relaunches)"
    same r.json
    # The relaunch appended the footer to the first launch's log, counting its records.
    compare_readers flips.jsonl
    ls /dev/shm | grep -q "resil-ec-$job-" && fail "segments left behind"
    echo "ok: killed inside the repair, relaunched, state_hash $(field r.json state_hash)"
    # Which --kill items fired is kept by position: a relaunch with :scrub where the killed run had
    # none is another configuration (exit 7, naming --kill), as a :node difference is.
    job=ctest-scrub-id-$$
    "$mpiexec" -n 4 "$bin" "${S[@]}" --k 2 --m 1 --ft ec --scrub --job-id "$job" --kill 0@3 >a.out 2>&1
    [ -e "/dev/shm/resil-ec-$job-1" ] || fail "the killed run left no segment"
    "$mpiexec" -n 4 "$bin" "${S[@]}" --k 2 --m 1 --ft ec --scrub --job-id "$job" --kill 0@3:scrub >b.out 2>b.err
    rc=$?
    [ $rc = 7 ] || fail "relaunch with --kill 0@3:scrub: exit $rc, expected 7: $(cat b.err)"
    grep -q -- "--kill 0@3 (this run: 0@3:scrub)" b.err || fail "$(cat b.err)"
    "$bin" --cleanup --job-id "$job" >/dev/null
    echo "ok: --kill :scrub is part of the segment's identity" ;;
  checkpoint)
    # A row the cadence has not reached yet is not written into a checkpoint: a full sweep and repair
    # runs before each one, since loading a checkpoint seals its rows with fresh checksums. A state of
    # 3000 stripes, so that the flipped row (stripe 500, row 2) is not read before the sweeps reach it.
    S2=(--tables 4 --rows 6000 --dim 8 --batch 48 --rows-per-fragment 4 --seed 11 --steps 24 --poll-us 200 --k 2 --m 1)
    "$mpiexec" -n 4 "$bin" "${S2[@]}" --ft none --report ref.json >ref.out 2>&1 || fail "reference run: $(cat ref.out)"
    # Preempted at step 10 (the touched cadence never reads the row): the next launch loads the
    # checkpoint and must end fault-free.
    job=ctest-scrub-ck-$$
    for i in 1 2; do
      "$mpiexec" -n 4 "$bin" "${S2[@]}" --ft ec --scrub --job-id "$job" --inject stripe@4:stripe=500:members=1:member=0:row=2 --signal-at 10 \
        --ckpt-dir ck --report p$i.json >run.out 2>&1
      echo "launch $i: exit $?" >>launches.txt
    done
    grep -q "launch 1: exit 75" launches.txt && grep -q "launch 2: exit 0" launches.txt || fail "preempt and continue: $(cat launches.txt; tail -3 run.out)"
    same p2.json
    [ "$(field p1.json scrub.repaired.data)" = 1 ] || fail "the checkpoint's sweep repaired $(field p1.json scrub.repaired.data) data rows, expected 1"
    # Two members of that codeword (m = 1: beyond repair), which the sweep of 50 stripes a step would
    # reach at step 11: the checkpoint of step 8 finds them first, and the run falls back to the one of
    # step 0 (never to one holding the corruption) and ends fault-free.
    "$mpiexec" -n 4 "$bin" "${S2[@]}" --ft ec --scrub --scrub-cadence touched+sweep --scrub-sweep 50 --fallback-ckpt --ckpt-interval 8 \
      --ckpt-dir ck2 --inject stripe@4:stripe=500:members=2:row=2 --report f.json >run.out 2>&1 || fail "fallback run: $(tail -3 run.out)"
    same f.json
    [ "$(field f.json scrub.fallbacks.0.step)" = 8 ] && [ "$(field f.json scrub.fallbacks.0.rollback_to)" = 0 ] ||
      fail "scrub.fallbacks: $(field f.json scrub.fallbacks)"
    ls /dev/shm | grep -q "resil-ec-$job-" && fail "segments left behind"
    echo "ok: checkpoints are swept first: preempted and fallback runs end fault-free" ;;
  during-rebuild)
    # Flips while a failed rank's stripes are rebuilt: the rows a degraded read or a rebuild reads
    # are checked on their holders first, so no decode reads a flipped row.
    ref 2 2
    ec --k 2 --m 2 --rebuild-stripes 8 --scrub --scrub-cadence touched+sweep --scrub-sweep 8 --fail 1@8 \
       --inject row@10:rank=2,parity@12:rank=3 --report r.json || fail "run: $(tail -3 run.out)"
    same r.json; repaired r.json data 1
    [ "$(field r.json failures.0.outcome)" = rebuilt ] || fail "failure outcome $(field r.json failures.0.outcome)" ;;
  log)
    ec --k 2 --m 2 --scrub --inject row@3:rank=1,parity@4,mlp@5:rank=2,opt@5:rank=3:bits=2,stripe@6:members=2 --inject-seed 5 \
       --inject-log flips.jsonl --report r.json || fail "run: $(tail -3 run.out)"
    /usr/bin/python3 - flips.jsonl <<'PY' || fail "flip log"
import json, struct, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
h, recs, foot = lines[0], lines[1:-1], lines[-1]
assert h["type"] == "header" and h["format"] == "resil-flip-log/1" and h["tool"] == "ec-train" and h["seed"] == 5, h
assert foot == {"type": "footer", "applied": 6, "output_sha256": ""}, foot
assert [r["seq"] for r in recs] == list(range(6)), [r["seq"] for r in recs]
assert [r["target"] for r in recs] == ["row", "parity", "mlp", "opt", "stripe", "stripe"], [r["target"] for r in recs]
for r in recs:
    old, new, mask = int(r["old"], 16), int(r["new"], 16), int(r["mask"], 16)
    assert old ^ new == mask and sorted(r["bits"]) == [b for b in range(32) if mask >> b & 1] and r["anchor"] in r["bits"], r
    v = struct.unpack("<f", struct.pack("<I", old))[0] if r["dtype"] == "f32" else old
    assert r["old_value"] == v or (v != v and r["old_value"] == "nan"), r
assert len(recs[3]["bits"]) == 2 and recs[2]["dataset"].startswith("/rank2/model/") and recs[3]["dataset"].startswith("/rank3/optimizer/"), recs[2:4]
assert all(r["dtype"] == ("u32" if r["dataset"].startswith("/parity/") else "f32") for r in recs) and recs[1]["dtype"] == "u32", recs
assert recs[0]["dataset"].startswith("/embedding/table") and recs[1]["dataset"].startswith("/parity/table"), recs[:2]
assert recs[4]["stripe"] == recs[5]["stripe"] and recs[4]["member_row"] == recs[5]["member_row"] and recs[4]["member"] != recs[5]["member"]
print("ok: flip log", len(recs), "records")
PY
    compare_readers flips.jsonl
    # The same seed flips the same bits.
    ec --k 2 --m 2 --scrub --inject row@3:rank=1,parity@4,mlp@5:rank=2,opt@5:rank=3:bits=2,stripe@6:members=2 --inject-seed 5 \
       --inject-log again.jsonl --report r2.json || fail "second run"
    cmp <(tail -n +2 flips.jsonl | sed 's/"t":[^,}]*//') <(tail -n +2 again.jsonl | sed 's/"t":[^,}]*//') || fail "the same --inject-seed flipped other bits"
    [ "$(field r.json state_hash)" = "$(field r2.json state_hash)" ] || fail "same flips, other state" ;;
  models)
    # ckpt-flip's bit fields and fault models: two adjacent bits from an exponent anchor, and a
    # sign flip, in rows, parity rows and a replica.
    ec --k 2 --m 2 --scrub --inject row@3,parity@4,mlp@5:rank=1,opt@6 --inject-seed 9 --inject-bits exponent --inject-model adjacent:2 \
       --inject-log adj.jsonl --report r.json || fail "run: $(tail -3 run.out)"
    /usr/bin/python3 - adj.jsonl <<'PY' || fail "adjacent:2 flip log"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
h, recs = lines[0], lines[1:-1]
assert h["model"] == "adjacent:2" and h["bits"] == "exponent" and "--inject-model=adjacent:2" in h["args"], h
assert len(recs) == 4, recs
for r in recs:
    a, bits = r["anchor"], r["bits"]
    assert 23 <= a <= 30 and bits == [a, a + 1], r
print("ok: adjacent:2 from exponent anchors", [r["anchor"] for r in recs])
PY
    compare_readers adj.jsonl
    ec --k 2 --m 2 --scrub --inject row@3,mlp@5:rank=3 --inject-bits sign --inject-log sign.jsonl --report s.json || fail "run: $(tail -3 run.out)"
    /usr/bin/python3 -c 'import json,sys
recs = [json.loads(l) for l in open(sys.argv[1])][1:-1]
assert len(recs) == 2 and all(r["bits"] == [31] and r["anchor"] == 31 and r["mask"] == "0x80000000" for r in recs), recs
print("ok: sign flips")' sign.jsonl || fail "sign flip log"
    compare_readers sign.jsonl ;;
  replica)
    # Data parallelism never re-synchronises the MLP replicas: a flip in rank 2's stays in rank 2.
    # At the last step a flip in its Adam state reaches only its own update: rank 0's replica is
    # the fault-free one, so a hash of rank 0's state alone calls the run masked.
    ref 2 1
    /usr/bin/python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))["replicas"]
assert r["diverged"] is False and len(set(r["xxh64"])) == 1 and len(r["xxh64"]) == 4, r' ref.json || fail "fault-free replicas: $(field ref.json replicas)"
    for t in opt mlp; do
      ec --k 2 --m 1 --inject $t@24:rank=2 --inject-bits exponent-msb --inject-seed 4 --report $t.json || fail "$t run: $(tail -3 run.out)"
      /usr/bin/python3 - $t ref.json $t.json <<'PY' || fail "$t flip in rank 2's replica"
import json, sys
t, ref, run = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
r, g = run["replicas"], ref["replicas"]["xxh64"]
assert r["diverged"] is True, r
assert r["xxh64"][2] != r["xxh64"][0] and r["xxh64"][0] == r["xxh64"][1] == r["xxh64"][3], r
assert run["state_hash"] != ref["state_hash"], (run["state_hash"], ref["state_hash"])
if t == "opt":
    assert r["xxh64"][0] == g[0], "rank 0's replica should be the fault-free one"
print(f"ok: {t} flip in rank 2: replicas {r['xxh64']}, state_hash {run['state_hash']} != {ref['state_hash']}")
PY
      grep -q "MLP replicas diverged" run.out || fail "no line saying the replicas diverged: $(cat run.out)"
    done ;;
  campaign)
    /usr/bin/python3 "$here/../../bench/ec/scrub_campaign.py" "$bin" --mpiexec "$mpiexec" --trials 2 --targets row,mlp --cadences off,touched \
      --steps 12 --rows 300 --no-plot --out c >campaign.out 2>&1 || fail "campaign: $(tail -5 campaign.out)"
    /usr/bin/python3 - c <<'PY' || fail "campaign records: $(cat c/trials.jsonl)"
import json, os, sys
recs = [json.loads(l) for l in open(os.path.join(sys.argv[1], "trials.jsonl"))]
assert len(recs) == 8, len(recs)
for r in recs:
    assert r["class"] in ("repaired", "masked", "escaped", "detected"), r
    assert len(r["flips"]) == 1 and r["flips"][0]["step"] == r["step"] and r["flips"][0]["rank"] in range(4), r
    f = r["flips"][0]
    if r["target"] == "row":
        assert f["dataset"].startswith("/embedding/table"), f
        want = "repaired" if r["cadence"] == "touched" else "detected"
        assert r["class"] == want and (want != "repaired" or r["flip_to_repair_steps"] >= 0), r
    else:
        assert f["dataset"].startswith(f"/rank{f['rank']}/model/"), f
        assert r["class"] != "masked" and (r["class"] == "detected" or r["replicas_diverged"] is True), r
summary = json.load(open(os.path.join(sys.argv[1], "summary.json")))["summary"]
assert [(x["target"], x["cadence"], x["trials"]) for x in summary] == [("row", "off", 2), ("row", "touched", 2), ("mlp", "off", 2), ("mlp", "touched", 2)], summary
print("ok: campaign of", len(recs), "trials:", [(r["target"], r["cadence"], r["class"]) for r in recs])
PY
    ;;
  usage)
    # Bad --scrub and --inject settings: one error line naming the option, exit 2, before any training.
    chk=$here/ec_train_check.py
    expect() {  # expect REGEX ARGS...: exit 2 with one line matching REGEX
      local re=$1; shift
      /usr/bin/python3 "$chk" expect-exit 2 "$re" --one-line -- "$mpiexec" -n 4 "$bin" "${S[@]}" --k 2 --m 1 "$@" >/dev/null || fail "expected exit 2 /$re/ for: $*"
    }
    expect "^ec-train: error: --scrub goes with --ft ec" --ft none --scrub
    expect "^ec-train: error: --scrub-sweep 4 needs --scrub-cadence sweep or touched\+sweep" --ft ec --scrub --scrub-sweep 4
    expect "^ec-train: error: --scrub-sweep and --scrub-cadence go with --scrub" --ft ec --scrub-cadence sweep
    expect "^ec-train: error: --inject: 'bogus@3': unknown target 'bogus'" --ft ec --inject bogus@3
    expect "^ec-train: error: --inject: 'row@0': the step must be" --ft ec --inject row@0
    expect "^ec-train: error: --inject: 'row@3:members=2': 'members' is not a key of target row" --ft ec --inject row@3:members=2
    expect "^ec-train: error: --inject row@99: step 99 is beyond --steps 24" --ft ec --inject row@99
    expect "^ec-train: error: --inject parity@3:rank=7: there are only 4 ranks" --ft ec --inject parity@3:rank=7
    expect "^ec-train: error: --inject parity@3: only --ft ec keeps parity" --ft none --inject parity@3
    expect "^ec-train: error: --inject stripe@3:members=4: a stripe has k \\+ m = 3 members" --ft ec --inject stripe@3:members=4
    expect "^ec-train: error: --inject-bits 'bogus': 'bogus' is not a bit number or field name" --ft ec --inject row@3 --inject-bits bogus
    expect "^ec-train: error: --inject-model 'adjacent:99': K must be" --ft ec --inject row@3 --inject-model adjacent:99
    expect "^ec-train: error: --inject row@3:bits=2: bits=2 is a fault model of its own" --ft ec --inject row@3:bits=2 --inject-model stuck-at-1
    expect "^ec-train: error: --inject row@3:bits=3: bits=3 needs as many selected bits, and --inject-bits sign selects 1" --ft ec --inject row@3:bits=3 --inject-bits sign
    expect "^ec-train: error: --kill 1@3:scrub: a kill inside a scrub repair needs --scrub" --ft ec --job-id x --kill 1@3:scrub
    expect "^ec-train: error: --scrub-sweep and --scrub-cadence go with --scrub" --ft ec --scrub-cadence touched
    expect "^ec-train: error: --inject: 'parity@3:at=delta': 'at' is not a key of target parity" --ft ec --inject parity@3:at=delta
    # stripe=S names a stripe of this state, never wrapped onto another.
    expect "^ec-train: error: --inject stripe@3:stripe=99999999: stripe 99999999 is beyond this state's [0-9]* stripes \\(0\\.\\.[0-9]*\\)" \
      --ft ec --inject stripe@3:stripe=99999999
    # A pattern file every rank reads: one line from rank 0, named by ec-train's option; exit 3.
    /usr/bin/python3 "$chk" expect-exit 3 "^ec-train: error: --inject-model .*/missing.json" --one-line -- "$mpiexec" -n 4 "$bin" "${S[@]}" --k 2 --m 1 \
      --ft ec --scrub --inject row@2 --inject-model "pattern:$dir/missing.json" >/dev/null || fail "a missing --inject-model pattern file"
    # A state whose failure bookkeeping the node cannot hold (26 tables of 2^30 rows, one row per
    # fragment: 2^35 stripes) is refused before anything is allocated: exit 3, one line naming it.
    /usr/bin/python3 "$chk" expect-exit 3 "^ec-train: error: the failure bookkeeping of [0-9]* stripes .* needs [0-9.]* GiB on each rank, but" --one-line -- \
      "$mpiexec" -n 2 "$bin" --k 1 --m 1 --steps 3 --dim 4 --batch 8 --rows 1073741824 --tables 26 --rows-per-fragment 1 --ft ec >/dev/null ||
      fail "a state too large for the node's memory"
    echo "ok: usage errors" ;;
  *) fail "unknown case $case" ;;
esac
