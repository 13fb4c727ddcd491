#!/bin/bash
# Many views of one storage cost linear time and a bounded listing: a plain torch.save of a list of
# 1,000,000 references to one tensor (2 MB), and a few-KB file whose memoised inner list gives
# 1023 x 1024 views, each inspect, inject and revert in seconds (the alias list was built by a
# linear search per view: hours), inspect's line listing a few of the names and counting the rest.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-shared-views
FLIP=$1
EXPECT_TIMEOUT=300  # linear: a few seconds each, far less on an idle machine; quadratic: hours

$PY - "$T" <<'PY' || fail "could not write the checkpoints"
import sys, torch
d = sys.argv[1]
t = torch.arange(4, dtype=torch.float32)
torch.save([t] * 1_000_000, f"{d}/list.pt")
torch.save([[t] * 1024] * 1023, f"{d}/nested.pt")
PY
for f in list.pt nested.pt; do
  F="$T/$f"
  views=$([ $f = list.pt ] && echo 1000000 || echo $((1023 * 1024)))
  expect_rc 0 "$FLIP" inspect "$F"
  [ "$(wc -l < "$T/stdout")" -le 6 ] && [ "$(wc -c < "$T/stdout")" -le 2000 ] || fail "$f: inspect listed too much: $(head -c 600 "$T/stdout")"
  grep -q "and $((views - 9)) other name(s)" "$T/stdout" || fail "$f: inspect does not count the other names: $(head -c 600 "$T/stdout")"
  sum=$(sha "$F")
  expect_rc 0 "$FLIP" inject "$F" --in-place --log "$T/$f.jsonl" --flips 5 --seed 1
  expect_rc 0 "$FLIP" revert "$F" --log "$T/$f.jsonl"
  [ "$(sha "$F")" = "$sum" ] || fail "$f: inject and revert did not give the file back"
done
echo PASS
