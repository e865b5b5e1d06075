"""Text a JSON line may carry that no decoder here takes: bytes that are not UTF-8,
escapes of half a UTF-16 surrogate pair (``"\\ud83d"``, what ``JSON.stringify``
and ``json.dumps`` write for half an emoji a host cut in two), and a byte order mark
in front (what Windows tools often write first).

Each is found with where it is, for a message a model can act on, and can be mended
(replaced by U+FFFD) so that the rest of the line is still read: which request the
line was is then certain, and it can be answered under its own id.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from .framing import BOM

# Each escape read whole, left to right, so an escaped backslash before a "u" is never
# taken for the start of an escape: a surrogate pair, a lone half, or any other escape.
_ESCAPE: Final = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})"
    rb"|\\."
)
_REPLACEMENT: Final = rb"\ufffd"


class Fault(NamedTuple):
    """What is wrong with a line's text, in words, and the line with it mended."""

    what: str
    mended: bytes


def utf8_fault(data: bytes) -> str | None:
    """Why ``data`` is not valid UTF-8, or None when it is.

    msgspec checks the strings it decodes, but not the bytes it keeps as Raw: without
    this check, invalid UTF-8 inside a result, params or an error's data would be passed
    on to the other side. Most messages are ASCII, which is confirmed without building
    a string."""
    if data.isascii():
        return None
    try:
        str(data, "utf-8")
    except UnicodeDecodeError as exc:
        return f"{exc.reason} at byte {exc.start}"
    return None


def lone_surrogate(line: bytes) -> Fault | None:
    """The first escape of half a surrogate pair in ``line``, and the line with each
    such escape replaced; None when it has none."""
    if b"\\u" not in line:
        return None
    found: list[bytes] = []

    def mend(m: re.Match[bytes]) -> bytes:
        half = m.group(1)
        if half is None:
            return m.group(0)
        found.append(half)
        return _REPLACEMENT

    mended = _ESCAPE.sub(mend, line)
    if not found:
        return None
    what = (
        f"a lone UTF-16 surrogate ({found[0].decode()}), half of a character (text cut"
        " inside an emoji?), which cannot be read as text: send the text with that"
        " character whole, or without it"
    )
    return Fault(what, mended)


def invalid_utf8(line: bytes) -> Fault | None:
    """Where ``line`` stops being UTF-8, and the line with each bad byte replaced; None
    when it is valid."""
    fault = utf8_fault(line)
    if fault is None:
        return None
    what = f"bytes that are not UTF-8 ({fault}): send its text encoded as UTF-8"
    return Fault(what, line.decode("utf-8", "replace").encode())


def leading_bom(line: bytes) -> Fault | None:
    """A byte order mark in front of ``line``, which JSON does not allow, and the line
    without it; None when it has none. (A peer mcpd reads lines from has it taken off
    first: ``framing.without_bom``.)"""
    if not line.startswith(BOM):
        return None
    what = "a byte order mark (U+FEFF) in front, which JSON does not allow: send it without one"
    return Fault(what, line[len(BOM) :])
