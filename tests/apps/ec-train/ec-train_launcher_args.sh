#!/usr/bin/env bash
# scripts/hpc/ec-train-run.sh's own arguments, with stand-ins for mpiexec and ec-train (no MPI):
# values it cannot use are exit 2 at once, a launcher or binary that cannot be run (126/127) is
# not relaunched, a path with spaces is one path, and an attempt that fails is relaunched
# --max-restarts times (a 20-digit --max-restarts is refused, not relaunched without end); the
# launcher command is split into words but not globbed; --help prints examples; a fresh report's
# exit_code is the answer even when mpiexec says 0; a signal to the script reaches ec-train as
# SIGUSR1 through the launcher, and the script waits for it and exits with the report's code.
. "$(dirname "$0")/../../support/test_lib.sh" ec-train-launcher-args
run=$SRC/scripts/hpc/ec-train-run.sh
dir=$T
mkdir -p "$dir/with space"; cd "$dir" || exit 1
cat >mpiexec.sh <<'SH'
#!/bin/bash
shift 2; exec "$@"
SH
# The stand-in ec-train counts its runs and exits $FAKE_RC without a report.
cat >"with space/ec-train" <<'SH'
#!/bin/bash
echo run >>"$(dirname "$0")/runs"
exit "${FAKE_RC:-9}"
SH
chmod +x mpiexec.sh "with space/ec-train"
bin="$dir/with space/ec-train"
expect() {  # expect RC REGEX -- ARGS...
  local want=$1 re=$2; shift 3
  "$run" "$@" >out 2>err; local rc=$?
  [ "$rc" = "$want" ] || fail "exit $rc, expected $want: $* ($(cat err))"
  grep -Eq -- "$re" err || fail "stderr does not match '$re': $(cat err)"
}
expect 2 "--max-restarts takes a number 0..999999999" -- -n 2 --max-restarts 99999999999999999999 --mpiexec ./mpiexec.sh --ec-train "$bin" -- --steps 1
expect 2 "--max-restarts takes a number" -- -n 2 --max-restarts -1 --mpiexec ./mpiexec.sh --ec-train "$bin" -- --steps 1
expect 2 "--report needs a value" -- -n 2 --mpiexec ./mpiexec.sh --ec-train "$bin" -- --steps 1 --report
expect 2 "-n RANKS is required" -- --mpiexec ./mpiexec.sh --ec-train "$bin" -- --steps 1
[ -e "with space/runs" ] && fail "a refused command line ran ec-train"
expect 127 "--ec-train '.*/missing/ec-train' is not an executable file" -- -n 2 --max-restarts 5 --mpiexec ./mpiexec.sh --ec-train "$dir/missing/ec-train" -- --steps 1
expect 127 "--mpiexec './no-such-mpiexec -x' cannot be run" -- -n 2 --mpiexec "./no-such-mpiexec -x" --ec-train "$bin" -- --steps 1
[ -e "with space/runs" ] && fail "a binary or launcher that cannot be run was relaunched"
"$run" --help >out 2>&1 && grep -q "^Examples:" out || fail "--help: $(cat out)"
# The launcher's words are not globbed: node[1-2] stays as written though a file node1 exists.
cat >argv.sh <<'SH'
#!/bin/bash
printf 'ARGV<%s>\n' "$@" >argv.out
SH
chmod +x argv.sh; touch node1
"$run" -n 2 --max-restarts 0 --mpiexec "./argv.sh -w node[1-2]" --ec-train "$bin" -- --steps 1 >/dev/null 2>&1
grep -q "ARGV<node\[1-2\]>" argv.out || fail "the launcher's words were globbed: $(cat argv.out)"
# A launcher that returns 0 although the attempt ended with exit 75 (MPICH 4.0's mpiexec does, now
# and then): the fresh report's exit_code, 75, is the answer.
cat >"with space/ec-train-75" <<'SH'
#!/bin/bash
while [ $# -gt 0 ]; do [ "$1" = --report ] && r=$2; shift; done
printf '{"exit_code": 75, "completed": false, "preempted": true}' >"$r.new" && mv "$r.new" "$r"
exit 75
SH
cat >mpiexec0.sh <<'SH'
#!/bin/bash
shift 2; "$@"; exit 0
SH
chmod +x "with space/ec-train-75" mpiexec0.sh
"$run" -n 2 --mpiexec ./mpiexec0.sh --ec-train "$dir/with space/ec-train-75" -- --steps 1 --report "$dir/r75.json" >out 2>err
rc=$?; [ "$rc" = 75 ] || fail "a launcher that says 0 over a report of 75: exit $rc, expected 75 ($(cat err))"
# SIGTERM to the script alone: the attempt gets SIGUSR1, ends with 75, and the script exits 75.
cat >"with space/ec-train-sig" <<'SH'
#!/bin/bash
while [ $# -gt 0 ]; do [ "$1" = --report ] && r=$2; shift; done
trap 'printf "{\"exit_code\": 75, \"completed\": false}" >"$r.new" && mv "$r.new" "$r"; exit 75' USR1
echo started >"$(dirname "$0")/sig-started"
for _ in $(seq 600); do sleep 0.1; done
exit 9
SH
chmod +x "with space/ec-train-sig"
"$run" -n 2 --mpiexec ./mpiexec.sh --ec-train "$dir/with space/ec-train-sig" -- --steps 1 --report "$dir/rsig.json" >out 2>err &
pid=$!
for _ in $(seq 100); do [ -e "with space/sig-started" ] && break; sleep 0.1; done
kill -TERM "$pid"
wait "$pid"; rc=$?
[ "$rc" = 75 ] || fail "SIGTERM to the script: exit $rc, expected 75 ($(cat err))"
# A path with a space is one path; a failing attempt (exit 9, no report) is relaunched 3 times.
FAKE_RC=9 expect 1 "not completed after 3 relaunches \(last exit 9\)" -- -n 2 --max-restarts 3 --mpiexec ./mpiexec.sh --ec-train "$bin" -- --steps 1
[ "$(grep -c run "with space/runs")" = 4 ] || fail "expected 4 runs (1 + 3 relaunches), got $(grep -c run "with space/runs")"
echo "ok: launcher arguments"
