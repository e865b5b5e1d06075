"""The names whose pins a server made mcpd forget, remembered in a fixed space.

Of the items a server no longer lists, only so many pins are kept (``digests``), and a
server decides what it lists: by listing and dropping enough names it can always have
the pin of an approved item forgotten, then list that item again, changed. So each
forgotten pin leaves its marks here, of what agents know the item by (``facing.marks``:
a tool's or a prompt's name, a few cuts of what a template may read), and an item new
to the server that finds one is judged as a change of an item whose approved definition
is lost, never taken as new.

The marks are a Bloom filter: a few bits set at places drawn from the SHA-256 of the
mark. A long mark costs no more than a short one, and none is ever pushed out. A name
never forgotten may find its bits set by others: the more marks, the likelier, until a
server that has made mcpd forget names without end has every new name it lists held.
That is the side to fail on, and on that server alone. How many marks were made is
told (``marked``), so that a person can see how likely that is.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
from typing import Final

BITS: Final = 1 << 16  # 8 KiB a list
_PROBES: Final = 4  # bits a name sets, each from two bytes of its digest
_BYTES: Final = BITS // 8


class Forgotten:
    """The marks of one list's forgotten pins."""

    __slots__ = ("_bits",)

    def __init__(self, bits: bytes = b"") -> None:
        self._bits = bytearray(bits or _BYTES)

    def add(self, mark: str) -> None:
        for at in _places(mark):
            self._bits[at >> 3] |= 1 << (at & 7)

    def __contains__(self, mark: str) -> bool:
        return all(self._bits[at >> 3] >> (at & 7) & 1 for at in _places(mark))

    def marked(self) -> int:
        """About how many marks were made, read from the bits set (no count is kept,
        so marks written before say it too); exact while few are."""
        set_bits = min(int.from_bytes(self._bits, "big").bit_count(), BITS - 1)
        return round(-BITS / _PROBES * math.log1p(-set_bits / BITS))

    def copy(self) -> Forgotten:
        return Forgotten(bytes(self._bits))

    def encoded(self) -> str:
        """As the pin file holds it."""
        return base64.b64encode(self._bits).decode()


def decoded(text: str) -> Forgotten | None:
    """Marks as the pin file holds them; None if that is not what ``text`` is."""
    try:
        bits = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return Forgotten(bits) if len(bits) == _BYTES else None


def _places(mark: str) -> list[int]:
    # A lone surrogate is a name a server can send: it is hashed as it came.
    digest = hashlib.sha256(mark.encode("utf-8", "surrogatepass")).digest()
    return [int.from_bytes(digest[2 * i : 2 * i + 2], "big") for i in range(_PROBES)]
