#!/usr/bin/env bash
# Run ec-train under mpiexec and relaunch it after an abnormal end until the run completes.
#   scripts/hpc/ec-train-run.sh -n RANKS [--max-restarts K] [--mpiexec CMD] [--ec-train BIN] -- EC_TRAIN_ARGS...
# Completion is judged from the report's "completed" field (a --report is added when none is
# given), not from mpiexec's exit code. A deliberate end is not retried: a report of this attempt
# with completed false (data loss, exit 8; preemption, 75) or a usage/input/mismatch error
# (exit 2, 3, 4, 7). Each relaunch runs the same command, so ec-train finds the same job id and
# its ranks' state segments (docs/design/ec-train-protocol.md, "Real failures"). Exit: the report's
# exit_code of the last attempt (75 after a preemption, 8 data loss; mpiexec's own code is not trusted
# for it), 0 when completed, 1 when --max-restarts was used up; 126/127 (the launcher or ec-train
# could not be run) is not retried either. SIGTERM, SIGUSR1 and SIGINT to this script reach the ranks
# as SIGUSR1 through mpiexec (a preemption: checkpoint, exit 75), and the script waits for them.
set -u
set -f  # CMD is split into words but never globbed (a nodelist like node[1-2] stays as it is)
usage="usage: ec-train-run.sh -n RANKS [--max-restarts K] [--mpiexec CMD] [--ec-train BIN] -- EC_TRAIN_ARGS..."
help="$usage
Runs ec-train under mpiexec and relaunches it after an abnormal end (a rank killed) until its
report says completed; each relaunch finds the ranks' state segments and continues.
  -n RANKS            ranks per attempt
  --max-restarts K    relaunches before giving up (default 10; exit 1 then)
  --mpiexec CMD       launcher command, split into words (default \$MPIEXEC or mpiexec)
  --ec-train BIN      the ec-train binary (default \$EC_TRAIN or ec-train on PATH)
Examples:
  scripts/hpc/ec-train-run.sh -n 6 --ec-train build/bin/ec-train -- --k 4 --m 2 --steps 300 --job-id demo --kill 2@100 --report r.json
      rank 2 kills itself at step 100; the relaunch continues from the segments; r.json says completed
  scripts/hpc/ec-train-run.sh -n 4 --mpiexec 'srun --mpi=pmi2' -- --k 2 --m 1 --steps 1000
      under Slurm (CMD may hold words)"
n=""; max=10; mpiexec=${MPIEXEC:-mpiexec}; bin=${EC_TRAIN:-ec-train}
while [ $# -gt 0 ]; do
  case "$1" in
    -n|--max-restarts|--mpiexec|--ec-train)
      [ $# -ge 2 ] || { echo "ec-train-run.sh: error: $1 needs a value ($usage)" >&2; exit 2; }
      case "$1" in -n) n=$2 ;; --max-restarts) max=$2 ;; --mpiexec) mpiexec=$2 ;; --ec-train) bin=$2 ;; esac
      shift 2 ;;
    --) shift; break ;;
    -h|--help) echo "$help"; exit 0 ;;
    *) echo "ec-train-run.sh: error: unknown option '$1' ($usage)" >&2; exit 2 ;;
  esac
done
case "$n" in ''|*[!0-9]*|0*) echo "ec-train-run.sh: error: -n RANKS is required, a positive number ($usage)" >&2; exit 2 ;; esac
# At most 9 digits: a longer number is beyond what the shell compares (it would relaunch without end).
case "$max" in ''|*[!0-9]*|??????????*) echo "ec-train-run.sh: error: --max-restarts takes a number 0..999999999" >&2; exit 2 ;; esac
# A binary or launcher that cannot be run is said once, not relaunched (Hydra reports its execvp
# error as exit 255, which looks like a rank's death).
runnable() { case "$1" in */*) [ -f "$1" ] && [ -x "$1" ] ;; *) command -v -- "$1" >/dev/null 2>&1 ;; esac; }
read -r -a launcher <<<"$mpiexec"
[ ${#launcher[@]} -gt 0 ] && runnable "${launcher[0]}" || { echo "ec-train-run.sh: error: --mpiexec '$mpiexec' cannot be run" >&2; exit 127; }
runnable "$bin" || { echo "ec-train-run.sh: error: --ec-train '$bin' is not an executable file" >&2; exit 127; }
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
  # Kept (empty, ours) until ec-train replaces it by rename: an empty file is "no report", and the
  # name is never free for someone else to take in a shared TMPDIR.
  report=$(mktemp "${TMPDIR:-/tmp}/ec-train-run.XXXXXX.json") || exit 3
  trap 'rm -f "$report"' EXIT
  args+=(--report "$report")
fi
# The report is the user's file: never removed here. An attempt wrote it when it is a new file
# (ec-train replaces it by rename, so its inode changes) -- an older report says nothing about this attempt.
stamp() { stat -L -c '%d:%i:%Y:%Z' -- "$report" 2>/dev/null || echo none; }
field() { /usr/bin/python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1])).get(sys.argv[2]))
except Exception: print("none")' "$report" "$1"; }
# A signal to this script (a scheduler, timeout, kill PID) is a preemption: the ranks get SIGUSR1
# through mpiexec, which forwards it, checkpoint at the step boundary and exit 75; the script waits
# for the attempt to end and does not relaunch after it.
child=0 signalled=0
forward() { signalled=1; [ "$child" != 0 ] && kill -s USR1 "$child" 2>/dev/null; }
trap forward TERM USR1 INT
attempt=0
while :; do
  # A signal between two attempts: no new one (the segments keep the state for the same command).
  if [ $signalled = 1 ]; then echo "ec-train-run.sh: stopped by a signal before a relaunch; run the same command again to continue" >&2; exit 75; fi
  before=$(stamp)
  $mpiexec -n "$n" "$bin" "${args[@]}" &  # CMD may hold words (srun --mpi=pmi2); BIN is one path
  child=$!
  while kill -0 "$child" 2>/dev/null; do wait "$child"; done  # a trapped signal interrupts wait
  wait "$child"
  rc=$?
  child=0
  fresh=0; [ "$(stamp)" != none ] && [ "$(stamp)" != "$before" ] && fresh=1
  if [ $fresh = 1 ] && [ "$(field completed)" = "True" ]; then exit 0; fi
  # Ended deliberately (data loss 8, preemption 75): not retried; the report's code, since mpiexec's
  # is not always the ranks' (MPICH 4.0 sometimes returns 0 when every rank exited 75).
  if [ $fresh = 1 ]; then code=$(field exit_code); case "$code" in ''|none|*[!0-9]*) exit "$rc" ;; *) exit "$code" ;; esac; fi
  if [ $signalled = 1 ]; then echo "ec-train-run.sh: stopped by a signal (attempt exit $rc, no new report)" >&2; exit "$rc"; fi
  case "$rc" in 2|3|4|7) exit "$rc" ;; esac          # the command or its inputs are wrong
  case "$rc" in 126|127) echo "ec-train-run.sh: error: '$mpiexec' or '$bin' could not be run (exit $rc): not retried" >&2; exit "$rc" ;; esac
  if [ "$attempt" -ge "$max" ]; then
    echo "ec-train-run.sh: error: not completed after $max relaunches (last exit $rc)" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  echo "ec-train-run.sh: attempt ended with exit $rc and no new report; relaunch $attempt of $max" >&2
done
