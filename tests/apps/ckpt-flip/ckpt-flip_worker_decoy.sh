#!/bin/bash
# Campaign "mode": "worker": at a trial's timeout the campaign kills the process group the worker
# named only when it is a child of that worker leading its own group. A worker that names another
# process (here an unrelated `setsid sleep`; it could as well name 1) gets replaced instead, and the
# other process lives: its group is never SIGKILLed.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-worker-decoy
FLIP=$1
DECOY=
on_exit() { [ -n "$DECOY" ] && kill -9 "$DECOY" 2> /dev/null; }
$PY - "$T/g.h5" <<'PYEOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["model/w"] = np.ones(64, np.float32)
PYEOF
echo '{"test_accuracy": 0.5}' > "$T/gsum.json"
# A stand-in for `ckpt-train serve`: says ready, takes one request, names the decoy as its trial.
cat > "$T/fake-serve" <<'PYEOF'
#!/usr/bin/python3
import os, socket, struct, time
s = socket.socket(fileno=0)
def send(b): s.sendall(struct.pack("<I", len(b)) + b)
send(b"ready")
h = s.recv(4, socket.MSG_WAITALL); s.recv(struct.unpack("<I", h)[0], socket.MSG_WAITALL)
send(b"P" + os.environ["DECOY"].encode())
time.sleep(300)
PYEOF
chmod +x "$T/fake-serve"
setsid sleep 300 & DECOY=$!
sleep 0.3
$PY - "$T/c.json" "$T/g.h5" "$T/gsum.json" "$T/fake-serve" <<'PYEOF'
import json, sys
json.dump({"name": "decoy", "checkpoint": sys.argv[2], "mode": "worker", "golden": {"summary": sys.argv[3]},
           "command": [sys.argv[4], "eval", "--from", "{ckpt}", "--summary", "{out}"],
           "trials": 1, "seed": 3, "timeout_s": 2, "inject": {"flips": 1}}, open(sys.argv[1], "w"))
PYEOF
DECOY=$DECOY expect_rc 0 "$FLIP" campaign "$T/c.json" --out "$T/out" --jobs 1 -q
kill -0 "$DECOY" 2> /dev/null || fail "the campaign killed a process group its worker did not start"
grep -q '"class":"hang"' "$T"/out/results/*.jsonl || fail "the trial is not recorded as hang: $(cat "$T"/out/results/*.jsonl)"
echo "ok: only the worker's own trial group is killed"
