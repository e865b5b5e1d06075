"""Paged lists for agents: opaque cursors over an aggregated list.

A cursor is the offset of the next page, wrapped so that an agent cannot mistake it
for anything it could build itself; a cursor that does not decode, or points past
the list, is the agent's error (-32602), as the protocol says.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import TypeVar

from protocol import jsonrpc as rpc

T = TypeVar("T")


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"mcpd:{offset}".encode()).decode()


def decode_cursor(cursor: str, total: int) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
        tag, _, num = text.partition(":")
        offset = int(num)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise rpc.RPCError(rpc.INVALID_PARAMS, f"Invalid cursor {cursor!r}") from None
    if tag != "mcpd" or not 0 <= offset <= total:
        raise rpc.RPCError(rpc.INVALID_PARAMS, f"Invalid cursor {cursor!r}")
    return offset


def page(items: Sequence[T], cursor: object, size: int) -> tuple[Sequence[T], str | None]:
    """The page ``cursor`` names (the first for a missing one) and the next cursor."""
    start = decode_cursor(cursor, len(items)) if isinstance(cursor, str) else 0
    chunk = items[start : start + (size or len(items) or 1)]
    end = start + len(chunk)
    return chunk, encode_cursor(end) if end < len(items) else None
