"""One JSON text as exactly one line: what enters from a source that is not
line-framed is made so (``one_line``), and every line written to an agent or a child
is checked to be so (``line_fault``), since a line framing is all that separates one
message from the next."""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import Raw


def one_line(data: bytes) -> bytes:
    """``data`` without insignificant line breaks: one JSON text as exactly one line.

    Whatever mcpd passes on as raw bytes (results, schemas, errors) is a slice of what
    a peer sent. From a source that is not line-framed (an HTTP body, an event's
    ``data`` lines) those bytes may carry the peer's pretty-printing, and written to an
    agent or a child as they are they would be dozens of broken lines. Line breaks
    inside JSON strings are always escaped, so a raw one is whitespace between tokens
    and can go; string contents (``\\u2028``, escaped newlines) are left exactly as
    they were. Raises ``msgspec.DecodeError`` for text that is not JSON.
    """
    if b"\n" in data or b"\r" in data:
        return msgspec.json.format(data, indent=-1)
    return data


_raw_decoder: Final = msgspec.json.Decoder(Raw)


def line_fault(line: bytes | bytearray) -> str | None:
    """Why ``line`` must not be written as one line of JSON-RPC, or None if it may.

    Every line mcpd writes to an agent or a child passes this check: a line with a
    raw line break would reach the peer as several broken messages, and one that is
    not JSON as garbage that ends the peer's session. Either is a bug in mcpd (what
    enters is normalised by ``decode_message``), which the writer refuses to pass on.
    """
    if b"\n" in line or b"\r" in line:
        return "it contains a raw line break"
    try:
        _raw_decoder.decode(line)
    except (msgspec.DecodeError, RecursionError) as exc:
        return f"it is not valid JSON ({exc})"
    return None
