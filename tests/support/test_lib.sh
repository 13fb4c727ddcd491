# The preamble every shell test of resil shares; source it first:
#   . "$(dirname "$0")/../support/test_lib.sh" NAME
# It sets PY (Debian's python3, which has h5py and numpy), SRC (the source tree), T (a private
# temporary directory, removed at exit, named after NAME) and defines:
#   fail MSG...             print FAIL: MSG and exit 1
#   run CMD...              run CMD with stdout/stderr in $T/stdout, $T/stderr; fail if it exits non-zero
#   expect_rc CODE CMD...   run CMD likewise; fail unless it exits CODE, and unless an error exit (any code
#                           but 0 and 10, scan's verdict) printed exactly one line on stderr
set -uo pipefail
PY=/usr/bin/python3
SRC=${RESIL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
T=$(mktemp -d "/tmp/${1:-resil-test}-XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { "$@" > "$T/stdout" 2> "$T/stderr" || { cat "$T/stdout" "$T/stderr"; fail "exit $?: $*"; }; }
expect_rc() {
  local want=$1; shift
  "$@" > "$T/stdout" 2> "$T/stderr"; local rc=$?
  [ "$rc" = "$want" ] || { cat "$T/stderr"; fail "exit $rc (want $want): $*"; }
  if [ "$want" != 0 ] && [ "$want" != 10 ]; then
    [ "$(wc -l < "$T/stderr")" = 1 ] || { cat "$T/stderr"; fail "expected one error line: $*"; }
  fi
}
