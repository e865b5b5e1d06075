"""Finding texts in JSON bytes however an encoder spelled them.

Inside a JSON string any character may be written as a ``\\uXXXX`` escape, its hex in
either case (one past U+FFFF as two, a surrogate pair), and ``/`` also as ``\\/``;
``"``, ``\\`` and controls must be escaped. Encoders differ in what else they escape
(``<``, ``>`` and ``&`` by Go's, ``=`` and ``'`` too by Gson's, all that is not ASCII by
Python's), and nothing keeps one from escaping any character it likes, or some
occurrences and not others. ``Spellings`` finds each of its texts whichever of these
forms each of its characters took, in the bytes as they came, without decoding them.

Bytes without ``\\u`` or ``\\/`` (nearly every message) can spell a text in one way
only, the way msgspec writes it: they are searched for that at the speed of a literal
search. Only bytes that hold one of those escapes are searched with a pattern that
reads every character as any of its spellings: still one search at C speed, with no
value decoded (a server's reply is decoded only once it is known to need taking
apart, where the cost of its values is bounded).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

import msgspec
from msgspec import Raw

# The escapes that let a character be spelled in more than one way.
_ANY_FORM: Final = rb"(?P<escape>\\[u/])"
_SHORT: Final = {
    '"': rb"\\\"",
    "\\": rb"\\\\",
    "\b": rb"\\b",
    "\f": rb"\\f",
    "\n": rb"\\n",
    "\r": rb"\\r",
    "\t": rb"\\t",
}


def plain_forms(value: str) -> set[bytes]:
    """``value`` as it is, and as it stands in a JSON string with no ``\\u`` or ``\\/``
    escape it need not have (as msgspec writes it)."""
    return {value.encode(), msgspec.json.encode(value)[1:-1]}


def _hex(unit: int) -> bytes:
    """A UTF-16 code unit's four hex digits, each letter in either case."""
    return b"".join(
        f"[{d}{d.upper()}]".encode() if d.isalpha() else d.encode() for d in f"{unit:04x}"
    )


def _units(code: int) -> tuple[int, ...]:
    if code < 0x10000:
        return (code,)
    code -= 0x10000
    return (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))


def _any_spelling(char: str) -> bytes:
    """A pattern of every way ``char`` may stand in a JSON string (and as it is)."""
    forms = [re.escape(char.encode())]
    if char in _SHORT:
        forms.append(_SHORT[char])
    if char == "/":
        forms.append(rb"\\/")
    forms.append(b"".join(rb"\\u" + _hex(unit) for unit in _units(ord(char))))
    return b"(?:" + b"|".join(forms) + b")"


class Spellings:
    """Some texts, compiled to be found in JSON bytes in any spelling of theirs.

    ``first`` finds the first place where one is in the form msgspec writes, or where
    an escape that spells a character in another way is (``\\u``, ``\\/``): a search
    at C speed that a caller on every call's path makes itself, and that finds nothing
    in nearly every message. Only after an escape is ``holds`` more than a look at it."""

    __slots__ = ("_escaped", "first")

    def __init__(self, values: Iterable[str]) -> None:
        texts = sorted({v for v in values if v}, key=len, reverse=True)
        if not texts:
            raise ValueError("no text to find")
        # Longest first: an alternation tries its branches in order.
        plain = sorted({f for v in texts for f in plain_forms(v)}, key=len, reverse=True)
        self.first = re.compile(b"|".join([*(re.escape(f) for f in plain), _ANY_FORM]))
        # The lookahead names the bytes a match can begin with, which lets the search
        # skip ahead to them rather than try the whole alternation at every byte.
        first = b"".join(sorted({re.escape(v.encode()[:1]) for v in texts} | {rb"\\"}))
        spelled = b"|".join(b"".join(_any_spelling(c) for c in v) for v in texts)
        self._escaped = re.compile(b"(?=[" + first + b"])(?:" + spelled + b")")

    @classmethod
    def of(cls, values: Iterable[str]) -> Spellings | None:
        """``Spellings`` of ``values``; None when there is none to find."""
        texts = [v for v in values if v]
        return cls(texts) if texts else None

    def holds(self, data: Raw | bytes, first: re.Match[bytes]) -> bool:
        """Whether JSON bytes ``data`` hold one of the texts, however spelled, given
        what ``first`` found in them."""
        if first.lastgroup != "escape":
            return True  # one of the texts, as msgspec writes it
        # A text may be spelled in part before the escape and in part after it.
        return self._escaped.search(data) is not None

    def found_in(self, data: Raw | bytes) -> bool:
        """Whether JSON bytes ``data`` hold one of the texts, however spelled."""
        first = self.first.search(data)
        return first is not None and self.holds(data, first)
