# The preamble every shell test of resil shares; source it first:
#   . "$(dirname "$0")/../support/test_lib.sh" NAME     (from tests/apps/<app>/: ../../support)
# It sets PY (Debian's python3, which has h5py and numpy), SRC (the source tree), T (a private
# temporary directory, removed at exit, named after NAME) and defines:
#   fail MSG...             print FAIL: MSG and exit 1
#   run CMD...              run CMD with stdout/stderr in $T/stdout, $T/stderr; fail if it exits non-zero
#   expect_rc CODE CMD...   run CMD likewise; fail unless it exits CODE, and unless an error exit (any code
#                           but 0 and 10, scan's verdict) printed exactly one line on stderr
#   expect_err CODE WORD CMD...  expect_rc, and the one error line names WORD
#   sha FILE                the SHA-256 of FILE (hex): "input untouched" checks compare it
#   kill9_campaign DIR N CMD...  run CMD (a campaign writing to DIR) in the background, output to DIR.log,
#                           as $CAMPAIGN_PID; once DIR holds N records kill -9 it and reap it, then fail
#                           if any process naming DIR/ survives (trials die with their campaign); fail,
#                           printing DIR.log, when it ends first or N records do not come within 120 s
# Set EXPECT_TIMEOUT=S to kill a command of expect_rc after S seconds (a FIFO input must not block a
# test forever); define on_exit() for cleanup of the test's own (it runs before $T is removed).
set -uo pipefail
PY=/usr/bin/python3
SRC=${RESIL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
T=$(mktemp -d "/tmp/${1:-resil-test}-XXXXXX")
EXPECT_TIMEOUT=${EXPECT_TIMEOUT:-0}
trap 'declare -F on_exit > /dev/null && on_exit; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
run() {
  local rc=0
  "$@" > "$T/stdout" 2> "$T/stderr" || rc=$?
  [ "$rc" = 0 ] || { cat "$T/stdout" "$T/stderr"; fail "exit $rc: $*"; }
}
expect_rc() {
  local want=$1; shift
  timeout "$EXPECT_TIMEOUT" "$@" > "$T/stdout" 2> "$T/stderr"; local rc=$?
  [ "$rc" = "$want" ] || { cat "$T/stdout" "$T/stderr"; fail "exit $rc (want $want): $*"; }
  if [ "$want" != 0 ] && [ "$want" != 10 ]; then
    [ "$(wc -l < "$T/stderr")" = 1 ] || { cat "$T/stderr"; fail "expected one error line: $*"; }
  fi
}
expect_err() {
  local want=$1 word=$2; shift 2
  expect_rc "$want" "$@"
  grep -q -- "$word" "$T/stderr" || { cat "$T/stderr"; fail "the error line does not name $word: $*"; }
}
# gone PATTERN: true once no process's command line matches PATTERN (pgrep -f), polled for up to 10 s:
# processes told to die (a parent-death signal, a killed process group) go within moments, longer
# on a loaded machine; a fixed wait made the checks fail under load.
gone() {
  local _
  for _ in $(seq 200); do
    [ -z "$(pgrep -f -- "$1")" ] && return 0
    sleep 0.05
  done
  return 1
}
kill9_campaign() {
  local dir=$1 n=$2; shift 2
  "$@" > "$dir.log" 2>&1 &
  CAMPAIGN_PID=$!  # an on_exit of the test may kill it when a check fails before the kill below
  for _ in $(seq 2400); do
    [ "$(cat "$dir"/results/*.jsonl 2> /dev/null | wc -l)" -ge "$n" ] && break
    kill -0 "$CAMPAIGN_PID" 2> /dev/null || break
    sleep 0.05
  done
  [ "$(cat "$dir"/results/*.jsonl 2> /dev/null | wc -l)" -ge "$n" ] || { cat "$dir.log"; fail "fewer than $n records in $dir before the kill"; }
  kill -9 "$CAMPAIGN_PID"
  wait "$CAMPAIGN_PID" 2> /dev/null
  CAMPAIGN_PID=
  gone "$dir/" || fail "processes of the killed campaign still run: $(pgrep -a -f -- "$dir/")"
}
