# The preamble every shell test of resil shares; source it first:
#   . "$(dirname "$0")/../support/test_lib.sh" NAME
# It sets PY (Debian's python3, which has h5py and numpy), SRC (the source tree), T (a private
# temporary directory, removed at exit, named after NAME) and defines:
#   fail MSG...             print FAIL: MSG and exit 1
#   run CMD...              run CMD with stdout/stderr in $T/stdout, $T/stderr; fail if it exits non-zero
#   expect_rc CODE CMD...   run CMD likewise; fail unless it exits CODE, and unless an error exit (any code
#                           but 0 and 10, scan's verdict) printed exactly one line on stderr
#   expect_err CODE WORD CMD...  expect_rc, and the one error line names WORD
# Set EXPECT_TIMEOUT=S to kill a command of expect_rc after S seconds (a FIFO input must not block a
# test forever); define on_exit() for cleanup of the test's own (it runs before $T is removed).
set -uo pipefail
PY=/usr/bin/python3
SRC=${RESIL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
T=$(mktemp -d "/tmp/${1:-resil-test}-XXXXXX")
EXPECT_TIMEOUT=${EXPECT_TIMEOUT:-0}
trap 'declare -F on_exit > /dev/null && on_exit; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { "$@" > "$T/stdout" 2> "$T/stderr" || { cat "$T/stdout" "$T/stderr"; fail "exit $?: $*"; }; }
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
