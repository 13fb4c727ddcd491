#!/usr/bin/env bash
# Real deaths of ec-train ranks under mpiexec, survived by relaunch (scripts/hpc/ec-train-run.sh):
# each case must end with the failure-free run's state_hash and parity equal to a fresh encode.
#   ec-train_kill.sh CASE EC_TRAIN MPIEXEC WORKDIR
# CASEs: external-SEED (kill -9 of a random rank at a random moment), external-node-SEED (the
# same, its segment removed first: a node loss), two-node-m2, second-during-rebuild,
# over-m-exit8, over-m-fallback, ckpt-kill, stale-segment, ckpt-in-write and ec-in-write (kill -9
# inside a checkpoint write), rebuild-external-SEED (an external kill -9 during a rebuild),
# before-first-commit (a death before anything was committed: a fresh start, recorded);
# phases-root-replaced (the timeline's phases survive a relaunch whose root was a replacement);
# commit-modes (--commit next-step redoes the step before a --kill, in-step none), external-instep-SEED
# and external-instep-node-SEED (external kills with --commit in-step);
# stale-data and stale-steps (a segment of other --data content or --steps is refused, exit 7),
# cleanup-running (--cleanup of a running job removes nothing), foreign-segment (a segment open to
# others or another user's is never attached; --cleanup says what it could not remove), report-paths (a --report that
# names an input, a FIFO or a checkpoint's name in --ckpt-dir is refused before training, a missing
# --data is exit 3; the launcher never
# removes a report and does not take an older one for this attempt's).
set -u
case=$1 bin=$2 mpiexec=$3 dir=$4/$1
here=$(cd "$(dirname "$0")" && pwd)
run=$here/../../../scripts/hpc/ec-train-run.sh
rm -rf "$dir"; mkdir -p "$dir"; cd "$dir" || exit 1
job=ctest-$case-$$
S=(--tables 4 --rows 600 --dim 8 --batch 48 --rows-per-fragment 4 --rebuild-stripes 8 --seed 11 --steps 40 --poll-us 200)
fail() { echo "FAIL: $*" >&2; "$bin" --cleanup --job-id "$job" >/dev/null 2>&1; exit 1; }
field() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))' "$1" "$2"; }
ref() { "$mpiexec" -n "$1" "$bin" "${S[@]}" --k "$2" --m "$3" --ft none --job-id "$job-ref" --report ref.json >ref.out 2>&1 || fail "reference run"; }
check() {  # check REPORT: same hash as ref.json, parity verified, no segment left
  [ "$(field "$1" completed)" = True ] || fail "$1 not completed"
  [ "$(field "$1" state_hash)" = "$(field ref.json state_hash)" ] || fail "state_hash $(field "$1" state_hash) != reference $(field ref.json state_hash)"
  [ "$(field "$1" parity_mismatches)" = 0 ] || [ "$(field "$1" ft)" != ec ] || fail "parity mismatches"
  ls /dev/shm | grep -q "resil-ec-$job-" && fail "segments left behind"
  /usr/bin/python3 "$here/../../ecrm/ec_train_check.py" timeline "$1" >/dev/null || fail "timeline of $1: $(/usr/bin/python3 "$here/../../ecrm/ec_train_check.py" timeline "$1")"
  echo "ok: $1 $(field "$1" state_hash), relaunches $(field "$1" relaunches)"
}
# kill -9 one rank (found by PMI_RANK in its environment) after DELAY seconds; NODE=1 removes its segment first.
killer() {
  local delay=$1 rank=$2 node=$3 t=0
  # The delay counts from the moment every rank has its segment (the run is under way): counted from
  # the launch, a loaded machine could let the kill land before any step committed, where a
  # relaunch rightly starts afresh and the test could not tell that the kill happened.
  until [ "$(ls /dev/shm | grep -c "^resil-ec-$job-[0-9]*\$")" -ge 4 ]; do
    sleep 0.02; t=$((t + 1)); [ $t -lt 1500 ] || return
  done
  sleep "$delay"
  for p in $(pgrep -x ec-train); do
    grep -qz "^PMI_RANK=$rank\$" "/proc/$p/environ" 2>/dev/null || continue
    tr '\0' ' ' <"/proc/$p/cmdline" | grep -q -- "--job-id $job " || continue
    [ "$node" = 1 ] && rm -f "/dev/shm/resil-ec-$job-$rank"
    kill -9 "$p" && echo "killed rank $rank (pid $p) after ${delay}s node=$node" >&2
  done
}
# kill -9 a rank inside a checkpoint write (after the run's first commit, so not the start
# checkpoint): a shard rank-R.h5 that exists without its commit marker rank-R.h5.done is being
# written by rank R; the kill landed inside the checkpoint's write when its manifest (written once
# every shard is committed) is still missing afterwards (a dead job writes nothing more). Retries at later checkpoints when the write finished first;
# prints the step of the checkpoint it hit and the rank. NODE=1 removes the rank's segment first (a node loss);
# WHICH=start aims at the start checkpoint instead (before the first commit: a fresh start).
kill_in_write() {
  local node=$1 which=${2:-later} t=0 f p r rank step
  local -A pid=()
  while [ $t -lt 4000 ] && [ ! -e stop ]; do
    # The job's ranks, looked up once per launch: the kill must follow the check at once.
    if [ ${#pid[@]} -lt 4 ] || ! kill -0 "${pid[0]}" 2>/dev/null; then
      pid=()
      for p in $(pgrep -x ec-train); do
        tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "--job-id $job " || continue
        r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^PMI_RANK=//p')
        [ -n "$r" ] && pid[$r]=$p
      done
    fi
    for f in ck/ckpt-step*/rank-*.h5; do
      [ -e "$f" ] && [ ! -e "$f.done" ] || continue
      step=${f#ck/ckpt-step}; step=${step%%/*}; step=$((10#$step))
      # A committed checkpoint (its manifest written) may drop its shards' markers: not a write.
      [ ! -e "${f%/*}.manifest.json" ] || continue
      # Step 0 is the start checkpoint, written before the launch's first commit.
      if [ "$which" = start ]; then [ "$step" = 0 ] || continue; else [ "$step" -gt 0 ] || continue; fi
      rank=${f##*/rank-}; rank=${rank%.h5}
      [ -n "${pid[$rank]:-}" ] || continue
      [ "$node" = 1 ] && rm -f "/dev/shm/resil-ec-$job-$rank"
      kill -9 "${pid[$rank]}" 2>/dev/null || continue
      sleep 0.1
      if [ ! -e "ck/ckpt-step$(printf %08d "$step").manifest.json" ]; then
        echo "killed rank $rank (pid ${pid[$rank]}) inside the write of $f" >&2
        echo "$step $rank"
        return
      fi
      echo "the checkpoint of $f was complete before the kill: trying again" >&2
    done
    sleep 0.005; t=$((t + 1))
  done
}
# The state is large enough (8 x 65536 rows x dim 16 = 64 MiB) for a shard write to take a while.
W=(--tables 8 --rows 65536 --dim 16 --batch 48 --rows-per-fragment 4 --rebuild-stripes 64 --seed 11 --steps 40 --poll-us 200)
case $case in
  ckpt-in-write|ec-in-write)
    S=("${W[@]}")
    ref 4 2 1
    if [ "$case" = ckpt-in-write ]; then node=0; ft=(--ft ckpt); else node=1; ft=(--ft ec --fallback-ckpt); fi
    # Every try kills a rank, also one whose write finished just before the kill (a loaded machine):
    # enough relaunches for a try at each of the run's checkpoints. A run in which every write
    # finished before the killer's poll saw it (an overloaded machine) is run again, at most 3 times:
    # the aim missed, nothing was tested.
    for attempt in 1 2 3; do
      rm -rf ck r.json stop hit.txt; "$bin" --cleanup --job-id "$job" >/dev/null 2>&1
      kill_in_write "$node" >hit.txt &
      "$run" -n 4 --ec-train "$bin" --max-restarts 10 -- "${S[@]}" --k 2 --m 1 "${ft[@]}" --ckpt-interval 5 --ckpt-dir ck --job-id "$job" --report r.json >r.out 2>&1 || fail "launcher exit $?"
      touch stop; wait
      hit=; read -r hit _ <hit.txt || true
      [ -n "$hit" ] && break
      echo "attempt $attempt: no kill landed inside a checkpoint write" >&2
    done
    [ -n "${hit:-}" ] || fail "no kill landed inside a checkpoint write in 3 runs"
    [ "$(field r.json relaunches)" -ge 1 ] || fail "no relaunch after the kill"
    # The checkpoint being written never counted: ckpt rolled back to an earlier one, ec went on from
    # its segments (the write comes after the commit of its step) without any checkpoint.
    /usr/bin/python3 -c 'import json,sys; f=json.load(open("r.json"))["failures"][-1]; hit=int(sys.argv[1])
ok = f["rollback_to"] < hit if f["outcome"] == "rolled-back" else f["step"] == hit + 1
sys.exit(0 if ok and f["relaunch"] else 1)' "$hit" || fail "unexpected recovery after a kill in the write of step $hit: $(cat r.json)"
    check r.json ;;
  before-first-commit)
    # A death before the launch's first commit (inside the start checkpoint, with node loss): the
    # relaunch starts afresh and the report records it (outcome restarted-fresh, the rank known).
    # 128 MiB of state: the start checkpoint, written once per launch, takes long enough to hit.
    S=("${W[@]/#65536/131072}")
    ref 4 2 1
    # The start checkpoint's write can be over before the killer sees it (page cache, a quiet
    # machine): then the run completes without a death and is tried again, up to 5 times.
    for try in 1 2 3 4 5; do
      rm -rf ck stop r.json; : >hit.txt
      kill_in_write 1 start >hit.txt &
      "$run" -n 4 --ec-train "$bin" --max-restarts 3 -- "${S[@]}" --k 2 --m 1 --ft ckpt --ckpt-interval 50 --ckpt-dir ck --job-id "$job" --report r.json >r.out 2>&1 || fail "launcher exit $?"
      touch stop; wait
      read -r hit hrank <hit.txt
      [ "${hit:-}" = 0 ] && break
      echo "try $try: the kill did not land inside the start checkpoint" >&2
    done
    # Not a failure of ec-train: the death this case is about could not be made to happen (CTest SKIP).
    [ "${hit:-}" = 0 ] || { echo "SKIP: the kill did not land inside the start checkpoint in 5 tries" >&2; "$bin" --cleanup --job-id "$job" >/dev/null 2>&1; exit 77; }
    /usr/bin/python3 -c 'import json,sys; r=json.load(open("r.json")); f=r["failures"]
sys.exit(0 if r["relaunches"]==1 and len(f)==1 and f[0]["outcome"]=="restarted-fresh" and f[0]["relaunch"] and f[0]["node_loss"] and f[0]["rank"]==int(sys.argv[1]) else 1)' "$hrank" \
      || fail "the death before the first commit is not in the report: $(cat r.json)"
    # The summary says the time of that death is unknown (not "relaunched in -1.000 s").
    grep -q "relaunched (it died before its first commit: when is unknown)" r.out || fail "summary of the fresh restart: $(grep death r.out)"
    check r.json ;;
  rebuild-external-*)
    # A first death with node loss (--kill), then an external kill -9 of a random rank at a random
    # moment of the replacement's rebuild (2 stripes per step: ~110 steps), with or without node
    # loss (m = 2: a second node loss in a stripe is still decodable).
    seed=${case##*-}; RANDOM=$seed; rank=$((RANDOM % 4)); node=$((RANDOM % 2)); delay=0.$((1 + RANDOM % 4))
    S=(--tables 4 --rows 600 --dim 8 --batch 48 --rows-per-fragment 4 --rebuild-stripes 2 --seed 11 --steps 200 --poll-us 200)
    ref 4 2 2
    (
      t=0
      until [ -e "/dev/shm/resil-ec-$job-1" ]; do sleep 0.01; t=$((t + 1)); [ $t -lt 3000 ] || exit 0; done
      while [ -e "/dev/shm/resil-ec-$job-1" ]; do sleep 0.01; t=$((t + 1)); [ $t -lt 6000 ] || exit 0; done  # the first death
      until [ -e "/dev/shm/resil-ec-$job-1" ]; do sleep 0.01; t=$((t + 1)); [ $t -lt 9000 ] || exit 0; done  # the relaunch
      killer "$delay" "$rank" "$node"
    ) &
    "$run" -n 4 --ec-train "$bin" --max-restarts 3 -- "${S[@]}" --k 2 --m 2 --ft ec --job-id "$job" --kill 1@10:node --report r.json >r.out 2>&1 || fail "launcher exit $?"
    wait
    [ "$(field r.json relaunches)" = 2 ] || fail "expected two relaunches (the external kill did not land?): $(field r.json relaunches)"
    /usr/bin/python3 -c 'import json,sys; f=json.load(open("r.json"))["failures"]; sys.exit(0 if len(f)==2 and f[1]["step"]<f[0]["redundant_after_step"] else 1)' \
      || fail "the external kill did not fall inside the rebuild: $(cat r.json)"
    check r.json ;;
  external-*)
    seed=${case##*-}; node=0; [[ $case == external-node-* || $case == external-instep-node-* ]] && node=1
    mode=(); [[ $case == external-instep-* ]] && mode=(--commit in-step)
    RANDOM=$seed; rank=$((RANDOM % 4)); delay=0.$((2 + RANDOM % 8))
    S=("${S[@]/#40/160}")  # long enough (~2 s) for the kill to land mid-run
    ref 4 2 1
    killer "$delay" "$rank" "$node" &
    "$run" -n 4 --ec-train "$bin" --max-restarts 3 -- "${S[@]}" --k 2 --m 1 --ft ec "${mode[@]}" --job-id "$job" --report r.json >r.out 2>&1 || fail "launcher exit $?"
    wait
    [ "$(field r.json relaunches)" -ge 1 ] || fail "the kill did not land during the run"
    check r.json ;;
  commit-modes)
    # --commit next-step: a --kill at the start of step S finds step S - 1's deltas still unsent, so
    # S - 1 is not committed and is redone; --commit in-step sends them at S - 1's end: nothing
    # completed is redone. Both end in the failure-free state (the same bytes either way).
    ref 4 2 1
    for c in next-step in-step; do
      "$run" -n 4 --ec-train "$bin" --max-restarts 2 -- "${S[@]}" --k 2 --m 1 --ft ec --commit $c --job-id "$job" --kill 1@12:node,2@25 --report $c.json >$c.out 2>&1 || fail "launcher ($c)"
      check $c.json
    done
    /usr/bin/python3 -c 'import json
for c, first in (("next-step", [11, 24]), ("in-step", [12, 25])):
    r = json.load(open(c + ".json"))
    assert r["commit_mode"] == c, r["commit_mode"]
    got = [f["step"] for f in r["failures"]]  # the first step not committed everywhere
    assert got == first, (c, got)' || fail "commit modes: the first uncommitted steps differ from next-step [11, 24], in-step [12, 25]"
    grep -q "death of rank 1 after step 11 was committed" in-step.out || fail "in-step summary: $(grep death in-step.out)"
    echo "ok: next-step redoes the step before each kill, in-step none" ;;
  two-node-m2)
    ref 4 2 2
    "$run" -n 4 --ec-train "$bin" --max-restarts 2 -- "${S[@]}" --k 2 --m 2 --ft ec --job-id "$job" --kill 1@12:node,2@12:node --report r.json >r.out 2>&1 || fail "launcher"
    [ "$(field r.json relaunches)" = 1 ] || fail "expected one relaunch"
    # Times count from the death (the last commit), not from the replacements' announcement after
    # the restart: the first step of the relaunch starts at least restart_s after t_fail.
    /usr/bin/python3 -c 'import json,sys; r=json.load(open("r.json")); f=r["failures"][0]; tl=r["timeline"]
first = min(t - d for t, d in zip(tl["t"], tl["dt"]) if t - d > f["t_fail"])
sys.exit(0 if first - f["t_fail"] >= f["restart_s"] - 1e-3 and f["time_to_redundancy_s"] >= f["restart_s"] else 1)' \
      || fail "t_fail is not the death: $(cat r.json)"
    check r.json ;;
  phases-root-replaced)
    # An emulated failure (degraded steps), then a node loss of rank 0, then a process crash of
    # rank 1: the last relaunch takes the timeline from rank 0, a replacement whose copy of the
    # steps before its own relaunch came from a survivor. The degraded steps stay degraded.
    # (A rebuild takes ~27 steps here: each death falls after the one before was rebuilt.)
    S=("${S[@]/#40/100}")
    ref 4 2 1
    "$run" -n 4 --ec-train "$bin" --max-restarts 3 -- "${S[@]}" --k 2 --m 1 --ft ec --job-id "$job" --fail 1@3 --kill 0@35:node,1@80 --report r.json >r.out 2>&1 || fail "launcher"
    /usr/bin/python3 -c 'import json,sys; f=json.load(open("r.json"))["failures"]
sys.exit(0 if [(x["rank"], x["outcome"], x["relaunch"]) for x in f] == [(1, "rebuilt", False), (0, "rebuilt", True), (1, "restarted", True)] else 1)' \
      || fail "unexpected failures: $(cat r.json)"
    check r.json ;;
  second-during-rebuild)
    ref 4 2 2
    "$run" -n 4 --ec-train "$bin" --max-restarts 3 -- "${S[@]}" --k 2 --m 2 --ft ec --job-id "$job" --kill 1@10:node,3@13:node --report r.json >r.out 2>&1 || fail "launcher"
    # The second death must fall inside the first replacement's rebuild (before it was redundant again).
    /usr/bin/python3 -c 'import json,sys; f=json.load(open("r.json"))["failures"]; sys.exit(0 if len(f)==2 and f[1]["step"]<f[0]["redundant_after_step"] else 1)' \
      || fail "the second death did not fall inside the first rebuild: $(cat r.json)"
    [ "$(field r.json relaunches)" = 2 ] || fail "expected two relaunches"
    check r.json ;;
  over-m-exit8)
    "$run" -n 4 --ec-train "$bin" --max-restarts 2 -- "${S[@]}" --k 2 --m 1 --ft ec --job-id "$job" --kill 1@10:node,2@10:node --report r.json >r.out 2>r.err
    rc=$?
    [ $rc = 8 ] || fail "exit $rc, expected 8"
    grep -q "ec-train: error: step [0-9]*: stripe .* but m = 1 tolerates 1; no --fallback-ckpt" r.err || fail "no data-loss line: $(cat r.err)"
    [ "$(field r.json completed)" = False ] || fail "report must say completed false"
    ls /dev/shm | grep -q "resil-ec-$job-" && fail "segments left behind"
    echo "ok: exit 8" ;;
  over-m-fallback)
    ref 4 2 1
    "$run" -n 4 --ec-train "$bin" --max-restarts 2 -- "${S[@]}" --k 2 --m 1 --ft ec --fallback-ckpt --ckpt-interval 5 --ckpt-dir ck --job-id "$job" --kill 1@13:node,2@13:node --report r.json >r.out 2>&1 || fail "launcher"
    /usr/bin/python3 -c 'import json,sys; f=json.load(open("r.json"))["failures"]; sys.exit(0 if f and all(x["outcome"]=="rolled-back" and x["rollback_to"]==10 for x in f) else 1)' || fail "expected a rollback to step 10"
    check r.json ;;
  ckpt-kill)
    ref 4 2 1
    "$run" -n 4 --ec-train "$bin" --max-restarts 3 -- "${S[@]}" --k 2 --m 1 --ft ckpt --ckpt-interval 5 --ckpt-dir ck --job-id "$job" --kill 3@13,0@22:node --report r.json >r.out 2>&1 || fail "launcher"
    /usr/bin/python3 -c 'import json,sys; f=json.load(open("r.json"))["failures"]; sys.exit(0 if [x["rollback_to"] for x in f]==[10,20] else 1)' || fail "expected rollbacks to 10 and 20"
    check r.json ;;
  stale-segment)
    "$mpiexec" -n 4 "$bin" "${S[@]}" --k 2 --m 1 --ft ec --job-id "$job" --kill 2@5 >a.out 2>&1
    [ -e "/dev/shm/resil-ec-$job-0" ] || fail "the killed run left no segment"
    "$mpiexec" -n 4 "$bin" "${S[@]}" --lr 0.1 --k 2 --m 1 --ft ec --job-id "$job" >b.out 2>b.err
    rc=$?
    [ $rc = 7 ] || fail "exit $rc, expected 7 (mismatch)"
    [ "$(grep -c . b.err)" = 1 ] || fail "expected one line: $(cat b.err)"
    grep -q "^ec-train: error: .*/dev/shm/resil-ec-$job-[0-9]*: segment of another job configuration: " b.err || fail "$(cat b.err)"
    # It names the settings that differ, with both values.
    grep -q -- "--kill 2@5 (this run: (none))" b.err && grep -q -- "--lr [0-9.e-]* (this run: 0.1)" b.err || fail "the differing settings are not named: $(cat b.err)"
    [ -e "/dev/shm/resil-ec-$job-0" ] || fail "the foreign segment was changed or removed"
    "$bin" --cleanup --job-id "$job" | grep -q "removed 4 state segment" || fail "cleanup"
    echo "ok: refused" ;;
  stale-data)
    # The same command, relative --data path and job id in another directory whose data.tsv holds
    # other samples: the survivors' segments were trained on the first file and must be refused.
    mkdir a b
    /usr/bin/python3 "$here/../../ecrm/ec_train_check.py" make-tsv a/data.tsv 300 >/dev/null
    head -n 200 a/data.tsv >b/data.tsv
    (cd a && "$mpiexec" -n 4 "$bin" "${S[@]}" --k 2 --m 1 --ft ec --job-id "$job" --data data.tsv --kill 2@5 >a.out 2>&1)
    [ -e "/dev/shm/resil-ec-$job-0" ] || fail "the killed run left no segment"
    (cd b && "$mpiexec" -n 4 "$bin" "${S[@]}" --k 2 --m 1 --ft ec --job-id "$job" --data data.tsv --kill 2@5 >b.out 2>b.err)
    rc=$?
    [ $rc = 7 ] || fail "exit $rc, expected 7: a segment trained on other data was attached: $(cat b/b.err b/b.out)"
    grep -q "^ec-train: error: .*segment of another job configuration: --data content (XXH64) [0-9a-f]* (this run: [0-9a-f]*); " b/b.err || fail "$(cat b/b.err)"
    # The first directory's command still continues from its segments (its kill fired already).
    (cd a && "$mpiexec" -n 4 "$bin" "${S[@]}" --k 2 --m 1 --ft ec --job-id "$job" --data data.tsv --kill 2@5 --report r.json >c.out 2>&1) || fail "relaunch in a/: $(cat a/c.out)"
    [ "$(field a/r.json relaunches)" = 1 ] || fail "a/ did not continue from its segments"
    echo "ok: refused other data, continued with the same" ;;
  stale-steps)
    "$mpiexec" -n 4 "$bin" "${S[@]}" --k 2 --m 1 --ft ec --job-id "$job" --kill 2@5 >a.out 2>&1
    "$mpiexec" -n 4 "$bin" "${S[@]/#40/80}" --k 2 --m 1 --ft ec --job-id "$job" --kill 2@5 >b.out 2>b.err
    rc=$?
    [ $rc = 7 ] || fail "exit $rc, expected 7 (another --steps is a mismatch, not damage): $(cat b.err)"
    grep -q "segment of a run with another --steps" b.err || fail "$(cat b.err)"
    "$bin" --cleanup --job-id "$job" | grep -q "removed 4 state segment" || fail "cleanup"
    echo "ok: refused" ;;
  cleanup-running)
    # --cleanup of a job that is running removes nothing (exit 3); the job completes untouched.
    "$run" -n 4 --ec-train "$bin" -- "${S[@]/#40/400}" --k 2 --m 1 --ft ec --job-id "$job" --report r.json >r.out 2>&1 &
    t=0; until [ "$(ls /dev/shm | grep -c "^resil-ec-$job-[0-9]*\$")" -ge 4 ] || [ $t -ge 1500 ]; do sleep 0.02; t=$((t + 1)); done
    "$bin" --cleanup --job-id "$job" >c.out 2>c.err
    rc=$?
    wait $! || fail "the job failed after --cleanup: $(cat r.out)"
    [ $rc = 3 ] || fail "--cleanup of a running job: exit $rc, expected 3"
    grep -q "in use by a running ec-train of job $job (nothing removed" c.err || fail "$(cat c.err)"
    [ "$(field r.json relaunches)" = 0 ] || fail "the job lost its segments and relaunched"
    echo "ok: nothing removed, job completed" ;;
  report-paths)
    # --report that names an input, a FIFO, a checkpoint's name inside --ckpt-dir: refused before training,
    # the input intact; through the launcher too (it never removes the report).
    /usr/bin/python3 "$here/../../ecrm/ec_train_check.py" make-tsv data.tsv 100 >/dev/null
    sum=$(sha256sum data.tsv)
    mkfifo fifo; mkdir ck
    for r in data.tsv fifo ck/ckpt-step00000005.manifest.json; do
      "$run" -n 4 --ec-train "$bin" -- "${S[@]}" --k 2 --m 1 --ft ec --job-id "$job" --data data.tsv --ckpt-dir ck --report "$r" >o.out 2>o.err
      rc=$?
      [ $rc = 2 ] || [ $rc = 3 ] || fail "--report $r: exit $rc, expected 2 or 3"
      [ "$(grep -c . o.err)" = 1 ] && grep -q "^ec-train: error: --report $r" o.err || fail "--report $r: $(cat o.err)"
      [ "$(sha256sum data.tsv)" = "$sum" ] || fail "--report $r changed the input"
    done
    [ -p fifo ] || fail "the FIFO was replaced"
    "$mpiexec" -n 3 "$bin" "${S[@]}" --k 2 --m 1 --ckpt-dir ./ck --report ck/ckpt-step00000005.json --job-id "$job" >o.out 2>o.err
    [ $? = 2 ] && grep -q "is a checkpoint's name inside --ckpt-dir" o.err || fail "--report ck/ckpt-step* with --ckpt-dir ./ck: $(cat o.err)"
    # --report naming a file of the checkpoint --resume reads, however --resume names it (the step
    # directory, the manifest, the directory of checkpoints; a link; a hard link), with --ckpt-dir
    # elsewhere: exit 2 naming --report, the checkpoint unchanged (not overwritten with exit 0).
    "$mpiexec" -n 3 "$bin" "${S[@]/#40/10}" --k 2 --m 1 --ft ckpt --ckpt-interval 5 --ckpt-dir c1 --job-id "$job-c1" >o.out 2>&1 || fail "checkpoint run: $(cat o.out)"
    ln -s c1/ckpt-step00000005.manifest.json mlink; ln c1/ckpt-step00000005/rank-1.h5 hlink.h5
    before=$(cat c1/ckpt-step00000005.manifest.json c1/ckpt-step00000005/* | sha256sum)
    for pair in "c1/ckpt-step00000005 c1/ckpt-step00000005.manifest.json" "c1/ckpt-step00000005/ c1/ckpt-step00000005/rank-1.h5" \
                "c1/ckpt-step00000005.manifest.json c1/ckpt-step00000005/rank-1.h5" "c1 c1/ckpt-step00000010.manifest.json" \
                "c1/ckpt-step00000005.manifest.json mlink" "c1/ckpt-step00000005.manifest.json hlink.h5"; do
      read -r from rep <<<"$pair"
      "$mpiexec" -n 3 "$bin" "${S[@]/#40/12}" --k 2 --m 1 --ft ckpt --ckpt-interval 5 --ckpt-dir c9 --resume "$from" --report "$rep" --job-id "$job-c9" >o.out 2>o.err
      rc=$?
      [ $rc = 2 ] && [ "$(grep -c . o.err)" = 1 ] && grep -q "^ec-train: error: --report $rep " o.err || fail "--resume $from --report $rep: exit $rc: $(cat o.err)"
      [ "$(cat c1/ckpt-step00000005.manifest.json c1/ckpt-step00000005/* | sha256sum)" = "$before" ] || fail "--resume $from --report $rep changed the checkpoint"
      [ -e c9 ] && fail "--resume $from --report $rep: wrote --ckpt-dir before refusing"
    done
    # A report beside the checkpoint under another name is fine.
    "$mpiexec" -n 3 "$bin" "${S[@]/#40/12}" --k 2 --m 1 --ft ckpt --ckpt-interval 5 --ckpt-dir c9 --resume c1/ckpt-step00000005 --report c1/report.json --job-id "$job-c9" >o.out 2>&1 || fail "a report beside the checkpoint: $(cat o.out)"
    # A missing --data is exit 3 (io) like every missing input, one line naming the option.
    "$mpiexec" -n 3 "$bin" "${S[@]}" --k 2 --m 1 --data missing.tsv --job-id "$job" >o.out 2>o.err
    [ $? = 3 ] && [ "$(grep -c . o.err)" = 1 ] && grep -q "^ec-train: error: --data missing.tsv: no such file" o.err || fail "--data missing.tsv: $(cat o.err)"
    # A completed report of another run is not taken for this attempt's: --kill dies, the
    # launcher relaunches (the stale "completed": true does not stop it) and the run completes.
    "$mpiexec" -n 4 "$bin" "${S[@]}" --k 2 --m 1 --ft none --job-id "$job-old" --report=r.json >/dev/null 2>&1 || fail "first run"
    "$run" -n 4 --ec-train "$bin" -- "${S[@]}" --k 2 --m 1 --ft ec --job-id "$job" --kill 1@5 --report=r.json >r.out 2>&1 || fail "launcher: $(cat r.out)"
    [ "$(field r.json relaunches)" = 1 ] && [ "$(field r.json job_id)" = "$job" ] || fail "the launcher stopped at the old report"
    "$run" -n 1 --ec-train "$bin" -- --help >h.out 2>&1 || fail "--help through the launcher: exit $?"
    echo "ok: refused, input intact, stale report ignored" ;;
  foreign-segment)
    # /dev/shm is every user's and job ids are predictable: a leftover segment opened to others
    # (mode 0666) or owned by another user is never attached (exit 3, one line naming its owner and
    # mode) and is left as it was; --cleanup by a user who may not remove the segments says which it
    # could not remove and exits 3. The other-user steps need root (chown, setpriv to nobody).
    "$mpiexec" -n 4 "$bin" "${S[@]}" --k 2 --m 1 --ft ec --job-id "$job" --kill 2@5 >a.out 2>&1
    seg=/dev/shm/resil-ec-$job-1
    [ -e "$seg" ] || fail "the killed run left no segment"
    chmod 0666 "$seg"
    sum=$(sha256sum <"$seg")
    refused() {  # refused WHAT PATTERN: the same command is refused with one line matching PATTERN
      "$mpiexec" -n 4 "$bin" "${S[@]}" --k 2 --m 1 --ft ec --job-id "$job" --kill 2@5 >b.out 2>b.err
      rc=$?
      [ $rc = 3 ] || fail "$1 was attached: exit $rc: $(cat b.err b.out)"
      [ "$(grep -c . b.err)" = 1 ] && grep -q "^ec-train: error: \(rank 1: \)\?$seg: $2" b.err || fail "$1: $(cat b.err)"
      [ "$(sha256sum <"$seg")" = "$sum" ] || fail "$1 was changed"
    }
    refused "a segment of mode 0666" "mode 0666 lets group or others read or write this job's state (owner uid $(id -u)"
    chmod 0600 "$seg"
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
      chown 65534 "$seg"
      refused "another user's segment" "owned by uid 65534 (nobody), not by this user (uid 0 (root))"
      chown 0 "$seg"
      setpriv --reuid 65534 --regid 65534 --clear-groups "$bin" --cleanup --job-id "$job" >c.out 2>c.err
      rc=$?
      [ $rc = 3 ] || fail "--cleanup by a user who cannot remove the segments: exit $rc: $(cat c.out c.err)"
      grep -q "^ec-train: error: removed 0 state segment(s) of job $job but could not remove 4: /dev/shm/resil-ec-$job-[0-9] (owner uid 0 (root): Permission denied)" c.err ||
        fail "--cleanup does not say what it left: $(cat c.err)"
      [ "$(ls /dev/shm | grep -c "^resil-ec-$job-[0-9]*\$")" = 4 ] || fail "--cleanup by another user removed segments"
    else
      echo "skipped: the other-user steps need root and setpriv"
    fi
    # Left as they were, the owner's own segments still continue the run.
    "$mpiexec" -n 4 "$bin" "${S[@]}" --k 2 --m 1 --ft ec --job-id "$job" --kill 2@5 --report r.json >d.out 2>&1 || fail "relaunch: $(cat d.out)"
    [ "$(field r.json relaunches)" = 1 ] || fail "the relaunch did not continue from the segments"
    echo "ok: refused, then continued" ;;
  *) fail "unknown case $case" ;;
esac
