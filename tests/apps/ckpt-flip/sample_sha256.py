"""The flip log's default file hash, sample-sha256 (docs/reference/flip-log.md#file-identity), written
from its definition alone with hashlib and os.pread: the reference ckpt-flip's C++ is checked against
(test ckpt-flip_identity, and the known answers of test_hash_rng.cpp).
usage: sample_sha256.py FILE...   prints one hex digest per file."""
import hashlib
import os
import sys

WHOLE = 4 << 20  # a file of at most this many bytes is hashed whole
EDGE = 64 << 10  # else its first and last EDGE bytes
BLOCK, BLOCKS = 4096, 256  # and BLOCKS blocks of BLOCK bytes evenly spaced between them


def ranges(size):
    if size <= WHOLE:
        return [(0, size)]
    span = size - 2 * EDGE - BLOCK
    return [(0, EDGE)] + [((EDGE + k * span // (BLOCKS - 1)) // BLOCK * BLOCK, BLOCK) for k in range(BLOCKS)] + [(size - EDGE, EDGE)]


def sample_sha256(path):
    h = hashlib.sha256(b"resil-sample-sha256/1\0")
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        h.update(size.to_bytes(8, "little"))
        for off, n in ranges(size):
            data = os.pread(fd, n, off)
            assert len(data) == n, (path, off, n)
            h.update(off.to_bytes(8, "little") + n.to_bytes(8, "little") + data)
    finally:
        os.close(fd)
    return h.hexdigest()


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(sample_sha256(p))
