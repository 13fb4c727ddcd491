#!/usr/bin/env bash
# Run ec-train under mpiexec and relaunch it after an abnormal end until the run completes.
#   scripts/hpc/ec-train-run.sh -n RANKS [--max-restarts K] [--mpiexec CMD] [--ec-train BIN] -- EC_TRAIN_ARGS...
# Completion is judged from the report's "completed" field (a --report is added when none is
# given), not from mpiexec's exit code. A deliberate end is not retried: a report of this attempt
# with completed false (data loss, exit 8; preemption, 75) or a usage/input/mismatch error
# (exit 2, 3, 4, 7). Each relaunch runs the same command, so ec-train finds the same job id and
# its ranks' state segments (docs/design/ec-train-protocol.md, "Real failures"). Exit: ec-train's code of the last
# attempt, 0 when completed, 1 when --max-restarts was used up; 126/127 (the launcher or ec-train
# could not be run) is not retried either.
set -u
usage="usage: -n RANKS [--max-restarts K] [--mpiexec CMD] [--ec-train BIN] -- EC_TRAIN_ARGS..."
n=""; max=10; mpiexec=${MPIEXEC:-mpiexec}; bin=${EC_TRAIN:-ec-train}
while [ $# -gt 0 ]; do
  case "$1" in
    -n|--max-restarts|--mpiexec|--ec-train)
      [ $# -ge 2 ] || { echo "ec-train-run.sh: error: $1 needs a value ($usage)" >&2; exit 2; }
      case "$1" in -n) n=$2 ;; --max-restarts) max=$2 ;; --mpiexec) mpiexec=$2 ;; --ec-train) bin=$2 ;; esac
      shift 2 ;;
    --) shift; break ;;
    *) echo "ec-train-run.sh: error: unknown option '$1' ($usage)" >&2; exit 2 ;;
  esac
done
case "$n" in ''|*[!0-9]*|0*) echo "ec-train-run.sh: error: -n RANKS is required, a positive number ($usage)" >&2; exit 2 ;; esac
# At most 9 digits: a longer number is beyond what the shell compares (it would relaunch without end).
case "$max" in ''|*[!0-9]*|??????????*) echo "ec-train-run.sh: error: --max-restarts takes a number 0..999999999" >&2; exit 2 ;; esac
args=("$@")
report=""
for ((i = 0; i < ${#args[@]}; ++i)); do
  case "${args[i]}" in
    --report)
      [ $((i + 1)) -lt ${#args[@]} ] || { echo "ec-train-run.sh: error: --report needs a value" >&2; exit 2; }
      report=${args[i+1]} ;;
    --report=*) report=${args[i]#--report=} ;;
    # Runs that train nothing: run once, their exit code is the answer.
    -h|--help|--cleanup) exec $mpiexec -n "$n" "$bin" "${args[@]}" ;;
  esac
done
if [ -z "$report" ]; then
  report=$(mktemp "${TMPDIR:-/tmp}/ec-train-run.XXXXXX.json")
  rm -f "$report"  # ec-train creates it; until then "no report"
  trap 'rm -f "$report"' EXIT
  args+=(--report "$report")
fi
# The report is the user's file: never removed here. An attempt wrote it when it is a new file
# (ec-train replaces it by rename, so its inode changes) -- an older report says nothing about this attempt.
stamp() { stat -L -c '%d:%i:%Y:%Z' -- "$report" 2>/dev/null || echo none; }
field() { /usr/bin/python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1])).get(sys.argv[2]))
except Exception: print("none")' "$report" "$1"; }
attempt=0
while :; do
  before=$(stamp)
  $mpiexec -n "$n" "$bin" "${args[@]}"  # CMD may hold words (srun --mpi=pmi2); BIN is one path
  rc=$?
  fresh=0; [ "$(stamp)" != none ] && [ "$(stamp)" != "$before" ] && fresh=1
  if [ $fresh = 1 ] && [ "$(field completed)" = "True" ]; then exit 0; fi
  if [ $fresh = 1 ]; then exit "$rc"; fi            # ended deliberately (exit 8, 75): do not retry
  case "$rc" in 2|3|4|7) exit "$rc" ;; esac          # the command or its inputs are wrong
  case "$rc" in 126|127) echo "ec-train-run.sh: error: '$mpiexec' or '$bin' could not be run (exit $rc): not retried" >&2; exit "$rc" ;; esac
  if [ "$attempt" -ge "$max" ]; then
    echo "ec-train-run.sh: error: not completed after $max relaunches (last exit $rc)" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  echo "ec-train-run.sh: attempt ended with exit $rc and no new report; relaunch $attempt of $max" >&2
done
