#!/usr/bin/env bash
# scripts/demo.sh's own checks, which end it before it installs, builds or deletes anything: --help,
# an unknown argument (exit 2), and an OUT that is a file or a directory of other files (exit 2,
# untouched): an argument never runs the whole demo, and its `rm -rf "$OUT"` deletes only a demo's
# own output.
. "$(dirname "$0")/../../support/test_lib.sh" demo-args
demo=$SRC/scripts/demo.sh
dir=$T
mkdir -p "$dir/precious"; cd "$dir" || exit 1
echo keep >file; echo keep >precious/data
bash "$demo" --help >out 2>err || fail "--help: exit $?"
grep -q "OUT is replaced" out || fail "--help does not say what OUT is: $(cat out)"
bash "$demo" --bogus >out 2>err; [ $? = 2 ] && grep -q "unknown argument '--bogus'" err || fail "--bogus: $(cat err)"
OUT=file bash "$demo" >out 2>err; [ $? = 2 ] && grep -q "OUT=$dir/file exists and is not a directory" err || fail "OUT=file: $(cat err)"
OUT=precious bash "$demo" >out 2>err; [ $? = 2 ] && grep -q "not an earlier demo's output" err || fail "OUT=precious: $(cat err)"
[ "$(cat file)" = keep ] && [ "$(cat precious/data)" = keep ] || fail "a refused OUT was changed"
echo "ok: demo.sh refuses what it must not delete"
