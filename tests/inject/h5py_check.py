"""Checks an injected file against its original with h5py only: every dataset still reads, every
attribute is unchanged, and the stored bits differ exactly where the flip log says."""
import json
import sys

import h5py
import numpy as np

orig, injected, log = sys.argv[1:4]
expect = {}  # (dataset, flat index) -> xor mask
with open(log) as fh:
    for line in fh:
        r = json.loads(line)
        if r["type"] == "flip":
            key = (r["dataset"], r["index"])
            expect[key] = expect.get(key, 0) ^ int(r["mask"], 16)
            assert int(r["old"], 16) ^ int(r["new"], 16) == int(r["mask"], 16)

def attrs_of(f):
    out = {}
    def visit(name, obj):
        out[name] = {k: np.asarray(v).tobytes() for k, v in obj.attrs.items()}
    f.visititems(visit)
    out["/"] = {k: np.asarray(v).tobytes() for k, v in f.attrs.items()}
    return out

bad = 0
seen = 0
with h5py.File(orig, "r") as a, h5py.File(injected, "r") as b:
    assert attrs_of(a) == attrs_of(b), "attributes changed"
    names = []
    a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    for n in names:
        x, y = a[n][()], b[n][()]  # every dataset still reads
        if x.dtype.kind not in "fiu":
            assert np.array_equal(x, y), n
            continue
        # Compare the numeric stored words: bit 0 = LSB of the value, whatever the byte order.
        w = x.dtype.itemsize
        ux = np.ascontiguousarray(x).reshape(-1).view(x.dtype.newbyteorder("=") if False else x.dtype).astype(x.dtype.newbyteorder("<")).view(f"<u{w}")
        uy = np.ascontiguousarray(y).reshape(-1).astype(y.dtype.newbyteorder("<")).view(f"<u{w}")
        diff = np.bitwise_xor(ux, uy)
        path = "/" + n
        for i in np.nonzero(diff)[0]:
            m = expect.get((path, int(i)), 0)
            if int(diff[i]) != m:
                print(f"{path}[{i}]: differs by {int(diff[i]):#x}, log says {m:#x}")
                bad += 1
            seen += 1
        for (p, i), m in expect.items():
            if p == path and m and int(diff[i]) != m:
                print(f"{path}[{i}]: logged {m:#x} but differs by {int(diff[i]):#x}")
                bad += 1
logged_paths = {p for p, _ in expect}
print(f"checked {seen} differing words over {len(logged_paths)} datasets; {bad} problems")
sys.exit(1 if bad else 0)
