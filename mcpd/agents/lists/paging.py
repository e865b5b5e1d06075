"""Paged lists for agents: opaque cursors over an aggregated list.

A cursor names where the next page starts and which list it was cut from: the offset,
and a digest of the list's keys (a tool's name, or a prompt's or resource's whole
encoding) in order. A list that changed between two pages (a server a reload added or
removed, a server's own list changing) no longer matches the digest, and the cursor is
refused with -32602 saying so: the agent lists again from the start and gets a
consistent list, where an offset into the changed list would have skipped or repeated
items without a word.

Resuming after the last item a page gave was the alternative, and is not what this
does: the lists are in the order of their servers and then each server's own order,
not in the order of the names agents see, so "after this name" has no answer once the
list changed, and an agent that resumed would still not know of an item changed before
its cursor. A list that changes while being paged is rare (every page of an unchanged
list is served as before), and the error tells the agent what to do.

A cursor that does not decode, or does not come from mcpd, is refused the same way; the
error quotes it cut short, as an agent can send one of any length.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Sequence
from typing import Final, TypeVar

from protocol.jsonrpc import messages as rpc
from protocol.shown.visible import quote

T = TypeVar("T")

TAG = "mcpd"
# A cursor mcpd makes is a few dozen characters: a longer one is none of its own, and
# is neither decoded nor quoted whole in the error that says so.
_CURSOR_CHARS: Final = 64
DIGEST_BYTES = 8


def list_digest(keys: Sequence[bytes]) -> str:
    """What a cursor carries of the list it was cut from: the keys, in order."""
    h = hashlib.blake2b(digest_size=DIGEST_BYTES)
    for key in keys:
        # Each key's length first, so that no two different lists run together alike.
        h.update(len(key).to_bytes(8, "big"))
        h.update(key)
    return h.hexdigest()


def encode_cursor(offset: int, digest: str) -> str:
    return base64.urlsafe_b64encode(f"{TAG}:{offset}:{digest}".encode()).decode()


def quoted_cursor(cursor: str) -> str:
    return quote(cursor, _CURSOR_CHARS)


def decode_cursor(cursor: str, total: int, digest: str) -> int:
    """The offset ``cursor`` names in a list of ``total`` items whose digest is ``digest``."""
    invalid = rpc.RPCError(rpc.INVALID_PARAMS, f"Invalid cursor {quoted_cursor(cursor)}")
    if len(cursor) > _CURSOR_CHARS:
        raise invalid  # longer than any mcpd writes: not worth decoding
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
        tag, num, made_from = text.split(":")
        offset = int(num)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise invalid from None
    if tag != TAG or len(made_from) != 2 * DIGEST_BYTES or offset < 0:
        raise invalid
    if made_from != digest:
        raise rpc.RPCError(
            rpc.INVALID_PARAMS,
            f"Cursor {quoted_cursor(cursor)} is from a list that has changed since;"
            " list again without a cursor",
        )
    if offset > total:
        raise invalid
    return offset


def page_of(
    items: Sequence[T], cursor: object, size: int, key: Callable[[T], bytes]
) -> tuple[Sequence[T], str | None]:
    """The page ``cursor`` names (the first for a missing one) and the next cursor;
    ``key`` is what of an item marks the list as another once it changes."""
    if not isinstance(cursor, str) and (not size or len(items) <= size):
        return items, None  # one page and no cursor: no digest to work out
    digest = list_digest([key(item) for item in items])
    start = decode_cursor(cursor, len(items), digest) if isinstance(cursor, str) else 0
    chunk = items[start : start + (size or len(items))]
    end = start + len(chunk)
    return chunk, encode_cursor(end, digest) if end < len(items) else None
