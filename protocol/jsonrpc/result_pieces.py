"""A long result written in pieces: a ``tools/list`` of thousands of tools is encoded
as the agent reads it, never whole in memory, and is still one line of JSON."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from ..lines.oneline import line_fault
from .messages import Id, encode, encode_onto, encode_result


class BrokenPiece(Exception):
    """A piece of a reply written in pieces is not JSON: the line is already begun,
    so the only way out is to end the connection (and log it: a fault in mcpd)."""


def encode_result_pieces(
    id: Id, result: msgspec.Struct, field: str, per: int, piece_bytes: int | None = None
) -> Iterator[bytes | memoryview]:
    """What ``encode_result(id, result)`` gives, in pieces: ``result``'s first field,
    ``field``, is a list, and each piece holds ``per`` of its items at most, encoded
    only when the piece before it has been taken. Each piece is checked as
    ``line_fault`` checks a line (raising ``BrokenPiece``); the pieces joined are one
    line of JSON.

    ``piece_bytes``: a piece also ends once it is that long, so it is at most that and
    one item more. Items are as large as a server made them: a count alone could make
    one piece of many megabytes for every agent listing at once."""
    items: Sequence[Any] = msgspec.structs.asdict(result)[field]
    empty = encode_result(id, msgspec.structs.replace(result, **{field: []}))
    head = b'{"jsonrpc":"2.0","id":' + encode(id) + b',"result":{"' + field.encode()
    head += b'":['
    fault = line_fault(empty)
    if fault is not None:
        raise BrokenPiece(fault)
    if not empty.startswith(head + b"]"):  # not the first field after all: one piece
        whole = encode_result(id, result)
        fault = line_fault(whole)
        if fault is not None:
            raise BrokenPiece(fault)
        yield whole
        return
    yield head
    most = math.inf if piece_bytes is None else piece_bytes
    at = 0
    while at < len(items):
        # Item by item: a server orders its tools, and ones of a few bytes before ones of
        # megabytes would make any guess from those before a piece of many megabytes.
        array = bytearray(b"[")
        encode_onto(items[at], array)
        taken, end = at + 1, min(len(items), at + per)
        while taken < end and len(array) < most:
            array += b","
            encode_onto(items[taken], array)
            taken += 1
        array += b"]"
        fault = line_fault(array)
        if fault is not None:
            raise BrokenPiece(fault)
        if at:
            yield b","
        yield memoryview(array)[1:-1]
        at = taken
    yield memoryview(empty)[len(head) :]
