"""What the Python-driven ckpt-flip tests share (ckpt-flip_torch.py, ckpt-flip_safetensors_npy.py,
ckpt-flip_dtypes.py, ckpt-flip_shards.py): argv is the ckpt-flip binary and a scratch directory; a
safetensors writer and reader written from the format's description (the independent reader)."""
import hashlib
import json
import struct
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


def write_safetensors(path, tensors, metadata=True):
    """tensors: {name: (dtype tag, shape, raw bytes)}, in order. Returns the data's offset in the file."""
    header, data = ({"__metadata__": {"format": "pt"}} if metadata else {}), b""
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
    return 8 + len(h)


def read_safetensors(path, at=0):
    """(the length and header bytes, {name: raw bytes as uint8}) of the safetensors file, or of the
    safetensors blob starting at byte `at` of the file."""
    import numpy as np
    buf = open(path, "rb").read()
    n = struct.unpack("<Q", buf[at:at + 8])[0]
    header = json.loads(buf[at + 8:at + 8 + n])
    data = at + 8 + n
    out = {}
    for k, v in header.items():
        if k != "__metadata__":
            b, e = v["data_offsets"]
            out[k] = np.frombuffer(buf[data + b:data + e], dtype=np.uint8)
    return buf[at:data], out


def bits(a, b):
    """Bits that differ between two arrays of the same size."""
    import numpy as np
    a, b = np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)
    return int(np.unpackbits(a ^ b).sum())
