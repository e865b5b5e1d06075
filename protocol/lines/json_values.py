"""How many Python objects a JSON text decodes to, told from its bytes without decoding
it.

What a decode costs (the time it holds the thread that runs it, the memory the result
takes) grows with the values and keys in the text far more than with its length: 15 MB
of one string is one object, 15 MB of ``[{},{},...]`` five million. ``parts_at_most``
bounds that number with a few passes of byte operations, so that a reply can be judged
before anything decodes it.

Every value but the outermost follows a ``[``, a ``,`` or a ``:``, and every key a
``{`` or a ``,``: those characters outside strings, plus one, are at least as many as
the values and keys. Inside strings they count for nothing, so when the plain count is
over the caller's cap it is taken again without the strings: escapes taken out first
(outside strings JSON has no backslash, and inside one each begins a pair), every
quote left opens or closes a string. A text with more strings than the cap is over it
by its strings alone, and is not split at them.
"""

from __future__ import annotations

from typing import Final

from msgspec import Raw

_SEPARATORS: Final = b"[{,:"
_QUOTE: Final = b'"'
_ESCAPED_BACKSLASH: Final = b"\\\\"
_ESCAPED_QUOTE: Final = b'\\"'


def parts_at_most(text: bytes | Raw, cap: int) -> int:
    """A number at least that of the values and keys in the JSON text ``text``, and
    over ``cap`` only when that number is (the caller decides what is too many).
    ``text`` is taken for JSON: of anything else the number means nothing."""
    data = text if isinstance(text, bytes) else bytes(text)
    count = _separators(data) + 1
    if count <= cap:
        return count
    plain = data
    if _ESCAPED_QUOTE in data:
        if _ESCAPED_BACKSLASH in data:
            plain = plain.replace(_ESCAPED_BACKSLASH, b"")
        plain = plain.replace(_ESCAPED_QUOTE, b"")
        count = _separators(plain) + 1
    strings = plain.count(_QUOTE) // 2
    if strings > cap:
        return strings
    # What is in the strings is taken off the count, measured on whichever side of the
    # quotes is the smaller (a text of many small values, or of a few long strings).
    pieces = plain.split(_QUOTE)
    inside = pieces[1::2]
    if sum(map(len, inside)) <= len(plain) // 2:
        return count - _separators(b"".join(inside))
    return _separators(b"".join(pieces[::2])) + 1


def _separators(data: bytes) -> int:
    return len(data) - len(data.translate(None, _SEPARATORS))
