"""Length-prefixed messages over a local stream socket: the protocol between a campaign and its
trial workers (core/include/resil/core/frames.hpp, the C++ side). A frame is a 4-byte
little-endian length and that many bytes; a list of strings is a count and a length-prefixed
string each. Strings are UTF-8, with undecodable bytes kept (surrogateescape): paths are bytes."""
import os
import struct

MAX_FRAME = 16 << 20  # the largest frame either side accepts: anything longer is a broken peer


def write_frame(fd, payload):
    """Write one frame; False when the peer is gone."""
    if len(payload) > MAX_FRAME:
        return False
    data = struct.pack("<I", len(payload)) + payload
    try:
        while data:
            n = os.write(fd, data)
            data = data[n:]
    except (BrokenPipeError, ConnectionError, OSError):
        return False
    return True


def _read_exact(fd, n):
    parts, left = [], n
    while left:
        try:
            b = os.read(fd, left)
        except (ConnectionError, OSError):
            return None
        if not b:
            return None
        parts.append(b)
        left -= len(b)
    return b"".join(parts)


def read_frame(fd):
    """One frame's bytes; None when the peer closed the stream, failed, or sent more than MAX_FRAME."""
    head = _read_exact(fd, 4)
    if head is None:
        return None
    (n,) = struct.unpack("<I", head)
    if n > MAX_FRAME:
        return None
    return _read_exact(fd, n) if n else b""


def encode_strings(strings):
    out = [struct.pack("<I", len(strings))]
    for s in strings:
        b = s.encode("utf-8", "surrogateescape")
        out += [struct.pack("<I", len(b)), b]
    return b"".join(out)


def decode_strings(payload):
    """The strings of encode_strings; None when the bytes do not parse exactly."""
    if len(payload) < 4:
        return None
    (n,) = struct.unpack_from("<I", payload, 0)
    pos, out = 4, []
    if n > len(payload):
        return None
    for _ in range(n):
        if len(payload) - pos < 4:
            return None
        (k,) = struct.unpack_from("<I", payload, pos)
        pos += 4
        if len(payload) - pos < k:
            return None
        out.append(payload[pos:pos + k].decode("utf-8", "surrogateescape"))
        pos += k
    return out if pos == len(payload) else None
