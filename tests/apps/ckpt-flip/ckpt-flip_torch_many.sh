#!/bin/bash
# Opening a torch.save file is linear in its storages. Each storage is a zip member looked up by
# name: a linear find made that quadratic (10,000 / 40,000 one-element tensors: inspect took
# 0.26 / 3.3 s of CPU; 80,000: 29 s for scan). CPU time, not wall time, is measured: the machine may
# be busy. 40,000 tensors must take under 1.5 s and under 8 times what 10,000 take (4 is linear).
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-torch-many
FLIP=$1

$PY - "$T" <<'PY' || fail "could not write the checkpoints"
import sys, torch
for n in (10000, 40000):
    torch.save({f"t{i}": torch.full((1,), float(i)) for i in range(n)}, f"{sys.argv[1]}/m{n}.pt")
PY
cpu() {  # cpu FILE: user + system seconds of inspect FILE
  /usr/bin/time -f "%U %S" -o "$T/time" "$FLIP" inspect "$1" > "$T/stdout" 2> "$T/stderr" || { cat "$T/stderr"; fail "inspect $1"; }
  awk '{print $1 + $2}' "$T/time"
}
small=$(cpu "$T/m10000.pt")
grep -q "^10000 dataset(s)" "$T/stdout" || fail "m10000.pt: $(tail -1 "$T/stdout")"
big=$(cpu "$T/m40000.pt")
grep -q "^40000 dataset(s)" "$T/stdout" || fail "m40000.pt: $(tail -1 "$T/stdout")"
echo "inspect: 10,000 tensors $small s, 40,000 tensors $big s of CPU"
awk -v s="$small" -v b="$big" 'BEGIN { exit !(b < 1.5 && b < 8 * (s < 0.05 ? 0.05 : s)) }' ||
  fail "not linear in the storages: 10,000 tensors $small s, 40,000 tensors $big s of CPU"
echo PASS
