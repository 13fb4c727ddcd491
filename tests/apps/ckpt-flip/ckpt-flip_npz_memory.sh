#!/bin/bash
# Deflated .npz members (np.savez_compressed) are inflated on use, one unedited member at a time:
# reading another evicts it. A 4 x 32 MiB archive (a few hundred KB on disk): scan's peak RSS is
# at most about one member above inspect's (which inflates none), diff's one member per file
# (and its read buffers); before, every member stayed inflated (plus a copy while loading): 4-5 members for scan,
# 8-10 for diff. inject -o with flips in every member keeps each edited one (edits are not lost
# to an eviction): every logged word holds its last `new` in the rewritten archive.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-npz-memory
FLIP=$1
MIB=32

$PY - "$T/z.npz" "$MIB" <<'PY' || fail "could not write the archive"
import sys
import numpy as np
a = np.zeros(int(sys.argv[2]) << 18, "f4")  # MiB x 2^20 / 4 elements
np.savez_compressed(sys.argv[1], a=a, b=a, c=a, d=a)
PY
rss() {  # rss CMD...: the peak RSS of CMD in KiB (exit 0 or 10 wanted)
  local rc=0
  /usr/bin/time -f %M -o "$T/rss" "$@" > "$T/stdout" 2> "$T/stderr" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 10 ] || { cat "$T/stdout" "$T/stderr"; fail "exit $rc: $*"; }
  tail -1 "$T/rss"
}
base=$(rss "$FLIP" inspect "$T/z.npz")
scan=$(rss "$FLIP" scan "$T/z.npz")
grep -q "verdict" "$T/stdout" || grep -q "clean" "$T/stdout" || fail "scan: $(cat "$T/stdout")"
diff=$(rss "$FLIP" diff "$T/z.npz" "$T/z.npz")
member=$((MIB * 1024))
echo "peak RSS: inspect $base KiB, scan $scan KiB, diff $diff KiB (a member is $member KiB)"
[ "$scan" -le $((base + member * 3 / 2)) ] || fail "scan holds more than one member inflated: $scan KiB (inspect $base KiB)"
# diff: one member per file, plus its own read buffers (up to 32 MiB a side). Before: 360 MiB.
[ "$diff" -le $((base + member * 2 + 96 * 1024)) ] || fail "diff holds more than one member per file inflated: $diff KiB (inspect $base KiB)"

# Flips in every member through a rewrite: none lost when reading another member evicts.
run "$FLIP" inject "$T/z.npz" -o "$T/o.npz" --log "$T/o.jsonl" --flips 40 --seed 7
$PY - "$T/o.npz" "$T/o.jsonl" <<'PY' || fail "the rewritten archive does not hold the logged flips"
import json, sys
import numpy as np
z = np.load(sys.argv[1])
last = {}
for line in open(sys.argv[2]):
    r = json.loads(line)
    if r.get("type") == "flip": last[(r["dataset"], r["index"])] = int(r["new"], 16)
members = {d for d, _ in last}
if members != {"/a", "/b", "/c", "/d"}: sys.exit(f"flips in {sorted(members)}, want all 4 members (pick another seed)")
for (d, i), new in last.items():
    got = int(z[d[1:]].view("<u4")[i])
    if got != new: sys.exit(f"{d}[{i}] is {got:#x}, the log's last new is {new:#x}")
changed = sum(int(np.count_nonzero(z[m].view("<u4"))) for m in "abcd")
if changed != sum(1 for v in last.values() if v != 0): sys.exit(f"{changed} words changed, the log has {len(last)}")
print(f"{len(last)} words in 4 members as logged")
PY
echo PASS
