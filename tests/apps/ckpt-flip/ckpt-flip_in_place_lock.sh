#!/bin/bash
# One in-place run per file, in every format (HDF5, torch.save, safetensors, .npy, stored and
# deflated .npz): while run A edits a file in place, run B on the same file (inject --in-place,
# revert, replay) exits 3 with one line naming the file and A's pid, writes no log and changes
# nothing; A then completes, and reverting A's log gives the original bytes back (no flip of A's was
# lost, none of B's slipped in). A is caught mid-run by SIGSTOP once it holds the file (its lock in
# /proc/locks) or has written its log.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-in-place-lock
FLIP=$1
A=
on_exit() { [ -n "$A" ] && { kill -CONT "$A"; kill "$A"; wait "$A"; } 2> /dev/null; }

$PY - "$T" <<'PY' || fail "could not write the checkpoints"
import io, json, struct, sys, zipfile
import h5py, numpy as np, torch
d, n = sys.argv[1], 1 << 20
w = np.arange(n, dtype="<f4")
with h5py.File(f"{d}/c.h5", "w") as f:
    f["model/w"] = w
torch.save({"model": {"w": torch.from_numpy(w.copy())}}, f"{d}/c.pt")
head = json.dumps({"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
head += b" " * (-len(head) % 8)
with open(f"{d}/c.safetensors", "wb") as fh:
    fh.write(struct.pack("<Q", len(head)) + head + w.tobytes())
np.save(f"{d}/c.npy", w)
np.savez(f"{d}/c.npz", w=w)
np.savez_compressed(f"{d}/z.npz", w=w)
PY

# wait_held F PID LOG: until PID holds F (an OFD lock on its inode) or has created LOG; then stop it.
wait_held() {
  local ino; ino=$(stat -c %i "$1")
  for _ in $(seq 3000); do
    if grep -qE "OFDLCK +ADVISORY +WRITE +[-0-9]+ +[0-9a-f]+:[0-9a-f]+:$ino " /proc/locks || [ -e "$3" ]; then
      kill -STOP "$2" 2> /dev/null || fail "$1: run A ended before it could be caught"
      return
    fi
    kill -0 "$2" 2> /dev/null || fail "$1: run A ended before it could be caught: $(cat "$T/a.err")"
    sleep 0.01
  done
  fail "$1: run A neither held the file nor wrote its log within 30 s"
}

for f in c.h5 c.pt c.safetensors c.npy c.npz z.npz; do
  F="$T/$f"
  orig=$(sha "$F")
  # A good log of this file for B's revert and replay (to a copy: the file itself stays as it was).
  run "$FLIP" inject "$F" -o "$T/copy" --log "$T/good.jsonl" --flips 3 --seed 9
  rm -f "$T/a.jsonl"
  "$FLIP" inject "$F" --in-place --log "$T/a.jsonl" --flips 50000 --seed 1 > "$T/a.out" 2> "$T/a.err" &
  A=$!
  wait_held "$F" "$A" "$T/a.jsonl"
  while IFS= read -r cmd; do
    eval "set -- $cmd"
    expect_err 3 "$F" "$FLIP" "$@"
    grep -q "in use by another in-place run (pid $A (ckpt-flip))" "$T/stderr" || fail "$f: ckpt-flip $1: the holder is not named: $(cat "$T/stderr")"
    [ ! -e "$T/b.jsonl" ] || fail "$f: the refused run left a log"
  done <<CMDS
inject "$F" --in-place --log "$T/b.jsonl" --flips 3 --seed 2
revert "$F" --log "$T/good.jsonl"
replay "$F" --log "$T/good.jsonl"
CMDS
  kill -CONT "$A"
  wait "$A" || fail "$f: run A failed: $(cat "$T/a.err")"
  A=
  run "$FLIP" revert "$F" --log "$T/a.jsonl"
  [ "$(sha "$F")" = "$orig" ] || fail "$f: reverting A's log does not give the original back"
  # Once A ended, the file is free again.
  run "$FLIP" inject "$F" --in-place --log "$T/b.jsonl" --flips 3 --seed 2
  run "$FLIP" revert "$F" --log "$T/b.jsonl"
  rm -f "$T/b.jsonl"
done
echo PASS
