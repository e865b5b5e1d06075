"""Paged lists for agents: opaque cursors over an aggregated list.

A cursor is the offset of the next page, wrapped so that an agent cannot mistake it
for anything it could build itself; a cursor that does not decode, or points past
the list, is the agent's error (-32602), as the protocol says.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Final, TypeVar

from protocol import jsonrpc as rpc
from protocol.visible import quote

T = TypeVar("T")

# A cursor mcpd makes is a few dozen characters: a longer one is none of its own, and
# is neither decoded nor quoted whole in the error that says so.
_CURSOR_CHARS: Final = 64


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"mcpd:{offset}".encode()).decode()


def decode_cursor(cursor: str, total: int) -> int:
    if len(cursor) > _CURSOR_CHARS:
        raise _invalid(cursor)
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
        tag, _, num = text.partition(":")
        offset = int(num)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise _invalid(cursor) from None
    if tag != "mcpd" or not 0 <= offset <= total:
        raise _invalid(cursor)
    return offset


def _invalid(cursor: str) -> rpc.RPCError:
    return rpc.RPCError(rpc.INVALID_PARAMS, f"Invalid cursor {quote(cursor, _CURSOR_CHARS)}")


def page(items: Sequence[T], cursor: object, size: int) -> tuple[Sequence[T], str | None]:
    """The page ``cursor`` names (the first for a missing one) and the next cursor."""
    start = decode_cursor(cursor, len(items)) if isinstance(cursor, str) else 0
    chunk = items[start : start + (size or len(items) or 1)]
    end = start + len(chunk)
    return chunk, encode_cursor(end) if end < len(items) else None
