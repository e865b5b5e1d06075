"""A decoder of journald's native protocol, to read what the handler sends."""

from __future__ import annotations

import re
import struct


def decode_entry(data: bytes) -> dict[str, str]:
    """``NAME=value\\n`` or ``NAME\\n`` + u64le length + value + ``\\n``, repeated."""
    fields: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        end = data.index(b"\n", pos)
        line = data[pos:end]
        if b"=" in line:
            name, value = line.split(b"=", 1)
            pos = end + 1
        else:
            name = line
            (size,) = struct.unpack("<Q", data[end + 1 : end + 9])
            value = data[end + 9 : end + 9 + size]
            assert data[end + 9 + size : end + 10 + size] == b"\n", "binary field not terminated"
            pos = end + 10 + size
        assert re.fullmatch(rb"[A-Z0-9][A-Z0-9_]*", name), name
        assert name.decode() not in fields, f"duplicate {name!r}"
        fields[name.decode()] = value.decode()
    return fields
