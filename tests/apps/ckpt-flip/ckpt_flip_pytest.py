"""What the Python-driven ckpt-flip tests share (ckpt-flip_torch.py,
ckpt-flip_safetensors_npy.py): argv is the ckpt-flip binary and a scratch directory."""
import hashlib
import subprocess
import sys

FLIP, T = sys.argv[1], sys.argv[2]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def flip(*args, rc=0):
    """Run ckpt-flip; fail unless it exits `rc`."""
    p = subprocess.run([FLIP, *args], capture_output=True, text=True)
    if p.returncode != rc:
        fail(f"ckpt-flip {' '.join(args)}: exit {p.returncode} (want {rc})\n{p.stdout}{p.stderr}")
    return p


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()
