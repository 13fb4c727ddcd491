#!/usr/bin/env bash
# scripts/hpc/ec-train-run.sh's own arguments, with stand-ins for mpiexec and ec-train (no MPI):
# values it cannot use are exit 2 at once, a launcher or binary that cannot be run (126/127) is
# not relaunched, a path with spaces is one path, and an attempt that fails is relaunched
# --max-restarts times (a 20-digit --max-restarts is refused, not relaunched without end).
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
expect 127 "could not be run \(exit 127\): not retried" -- -n 2 --max-restarts 5 --mpiexec ./mpiexec.sh --ec-train "$dir/missing/ec-train" -- --steps 1
# A path with a space is one path; a failing attempt (exit 9, no report) is relaunched 3 times.
FAKE_RC=9 expect 1 "not completed after 3 relaunches \(last exit 9\)" -- -n 2 --max-restarts 3 --mpiexec ./mpiexec.sh --ec-train "$bin" -- --steps 1
[ "$(grep -c run "with space/runs")" = 4 ] || fail "expected 4 runs (1 + 3 relaunches), got $(grep -c run "with space/runs")"
echo "ok: launcher arguments"
