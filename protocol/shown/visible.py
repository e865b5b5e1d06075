"""Text from servers as people read it, in the commands' output and in mcpd's log:
every character that would act on a terminal, or hide from the person reading, is
shown as an escape instead.

A server writes tool descriptions, results, errors and stderr lines; printed raw, an
escape sequence could erase or recolour what the operator is reviewing, a carriage
return could write over it, a bidi override could reorder it, and zero-width or tag
characters could carry words nobody sees. ``visible`` turns each such character into
its Python escape (``\\r``, ``\\x1b``, ``\\u202e``, ``\\U000e0041``): control characters (C0,
DEL, C1), format characters (category Cf: bidi controls, zero-width characters, tags),
the whole tag block, the variation selectors but text and emoji presentation (a run
of them after an emoji can spell any bytes), letters blank by design, line and
paragraph separators, and lone surrogates (which cannot even be written to a UTF-8
terminal). Everything else, non-ASCII letters and emoji included, is printed as it is.

Where mcpd puts a server's text inside a sentence of its own (why a server is down,
what it answered), ``quote`` makes it one line between double quotes, cut to a bound:
its line breaks, quotes and backslashes written as escapes too, so it can neither end
the quote nor start a line of its own, and whatever it says reads as the server's.

The commands colour their own output after the server's text has passed through here,
so mcpd's colours are the only escapes a terminal receives. The same goes for the log:
``mcpd serve`` in a terminal, and ``journalctl``, which shows a message with a control
character in it as a blob instead of its text.
"""

from __future__ import annotations

import codecs
import functools
import re
import unicodedata
from collections.abc import Iterable
from typing import Final

from .stand_ins import masked

_HIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_TAGS: Final = range(0xE0000, 0xE0080)  # partly unassigned, all invisible
# Printable by Python's measure, yet drawing nothing: the variation selectors but the
# text and emoji presentation ones (a run of them after an emoji can carry any bytes),
# and letters and marks that are blank by design (the grapheme joiner, Hangul fillers).
_BLANK: Final = (
    "\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u3164\uffa0"
    "\ufe00-\ufe0d\U000e0100-\U000e01ef"
)
_BLANK_CHAR: Final = re.compile(f"[{_BLANK}]")


def hidden(ch: str) -> bool:
    """``ch`` acts on a terminal or draws nothing: see the module's list."""
    return (
        ord(ch) in _TAGS
        or unicodedata.category(ch) in _HIDDEN_CATEGORIES
        or _BLANK_CHAR.match(ch) is not None
    )


def _plain(text: str) -> bool:
    """Nothing in ``text`` to escape: the quick test before looking for what to escape."""
    return text.isprintable() and _BLANK_CHAR.search(text) is None


_SHORT: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def written_out(ch: str) -> str:
    """``ch`` as its Python escape, which no character that follows can be read into."""
    short = _SHORT.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


# Every hidden character lies in the first two planes or in the tag and variation
# selector blocks of the fourteenth (a test checks each code point against ``hidden``).
_SCANNED: Final = (range(0x20000), range(0xE0000, 0xE0200))


class _Escapes:
    """The hidden characters as one character class, and their escapes as a
    ``str.translate`` table: a text is searched and rewritten at C speed, whatever a
    server puts in it. Built the first time a text has something to escape."""

    def __init__(self) -> None:
        codes = [c for plane in _SCANNED for c in plane if hidden(chr(c))]
        self.table = {c: written_out(chr(c)) for c in codes}
        spans = class_body(codes)
        self.every = re.compile(f"[{spans}]+")
        # In a multi-line field its line breaks and tabs are kept.
        self.in_lines = re.compile(f"(?:(?![\\n\\t])[{spans}])+")

    def escaped(self, m: re.Match[str]) -> str:
        return m.group().translate(self.table)


def char_class(codes: Iterable[int]) -> re.Pattern[str]:
    """One character class of ``codes``. A pattern that is a single class looks at each
    character once: it cannot backtrack."""
    return re.compile(f"[{class_body(codes)}]")


def class_body(codes: Iterable[int]) -> str:
    """What goes between the brackets of a character class of ``codes`` (in order),
    written as ranges."""
    spans: list[tuple[int, int]] = []
    for code in codes:
        if spans and spans[-1][1] == code - 1:
            spans[-1] = (spans[-1][0], code)
        else:
            spans.append((code, code))
    return "".join(_span(low, high) for low, high in spans)


def _span(low: int, high: int) -> str:
    first = re.escape(chr(low))
    return first if low == high else f"{first}-{re.escape(chr(high))}"


@functools.cache
def _escapes() -> _Escapes:
    return _Escapes()


def visible(text: str, *, lines: bool = False) -> str:
    """``text`` safe to print: what would act on the terminal or hide is escaped.

    ``lines``: a multi-line field (a result, a resource, stderr, a log message): its
    line breaks (``\\n``, and ``\\r\\n`` as one) and tabs are kept; a ``\\r`` of its own
    is escaped like the rest, so no line can write over another. Otherwise every
    control character is escaped, line breaks and tabs included."""
    if _plain(text):  # the common case: nothing to look at
        return text
    if not lines:
        return _escaped(text)
    escapes = _escapes()
    return escapes.in_lines.sub(escapes.escaped, text.replace("\r\n", "\n"))


def _escaped(text: str) -> str:
    if _plain(text):
        return text
    escapes = _escapes()
    return escapes.every.sub(escapes.escaped, text)


# How much of a server's text goes into one of mcpd's sentences: enough for an error
# message or a line of stderr, not enough to bury the sentence.
QUOTED: Final = 300
# And of a method a server names (its own request's) or a request id it sends: both
# are short when honest.
METHOD_SHOWN: Final = 100
ID_SHOWN: Final = 100
_QUOTE_ESCAPES: Final = re.compile(r'[\\"]')


def quote(text: str, limit: int = QUOTED) -> str:
    """A server's ``text`` as one line of mcpd's quotes it: between double quotes, its
    first ``limit`` characters with every control and hidden character escaped (line
    breaks and tabs included), and ``\\`` and ``"`` as ``\\\\`` and ``\\"``; a cut is
    marked after the closing quote, in mcpd's words. A value being masked is masked
    before anything else (``masking``)."""
    text = masked(text)
    more = len(text) - limit
    if more > 0:
        text = text[:limit]
    body = _escaped(_QUOTE_ESCAPES.sub(_backslashed, text))
    return f'"{body}"' + (_more(more, "characters") if more > 0 else "")


def quoted_id(rid: str | int | None) -> str:
    """A JSON-RPC id a server sent, as mcpd's sentences show it: a string quoted as any
    of a server's text, a number as it is; either cut at ``ID_SHOWN``."""
    if isinstance(rid, str):
        return quote(rid, ID_SHOWN)
    return cut(str(rid), ID_SHOWN)


# Every cut mcpd makes in a server's words is followed by one of these notes: after
# the closing quote of a ``quote``, or after ``…`` where the words are kept unquoted.
# The secret guard looks for them: a server can pad what it echoes to put a cut inside
# a secret, and the beginning it leaves is masked only where such a note says a cut
# is. A cut of a server's words made without one could show all of a secret but its
# end, so each goes through ``quote``, ``cut`` or ``cut_bytes``.
CUT_NOTE: Final = re.compile(r'["\u2026] \(and (?:over )?\d+ more (?:characters|bytes)\)')


def _more(count: int, unit: str, *, over: bool = False) -> str:
    return f" (and {'over ' if over else ''}{count} more {unit})"


def cut(text: str, limit: int) -> str:
    """A server's ``text`` as it is, or its first ``limit`` characters and the note of
    the cut."""
    more = len(text) - limit
    return text if more <= 0 else text[:limit] + "\u2026" + _more(more, "characters")


def cut_bytes(data: bytes, limit: int, *, whole: int | None = None) -> str:
    """The bytes a server wrote as text (invalid UTF-8 replaced), cut after ``limit``
    bytes with the note of the cut. ``whole``: ``data`` is only the start of what it
    wrote, which was longer than that many bytes."""
    more = len(data) - limit
    if whole is None and more <= 0:
        return data.decode("utf-8", "replace")
    # A character the cut splits is left out, so what is kept ends where the
    # server's words did (a secret's beginning is found up to the cut).
    kept = codecs.getincrementaldecoder("utf-8")("replace").decode(data[:limit], final=False)
    if whole is None:
        return kept + "\u2026" + _more(more, "bytes")
    return kept + "\u2026" + _more(whole - min(limit, len(data)), "bytes", over=True)


def _backslashed(m: re.Match[str]) -> str:
    return "\\" + m.group()


# Outside the printable ASCII range: the only characters that can be hidden ones.
_NOT_PLAIN: Final = re.compile(r"[^ -~]")


def visible_json(data: bytes) -> bytes:
    """JSON text for people to read (``curl`` in a terminal, a browser's viewer): each
    hidden character in its strings written as a ``\\uXXXX`` escape (a surrogate pair
    beyond the BMP). JSON encoders escape only C0 controls; DEL, C1 controls (such as
    the one-byte CSI, U+009B) and format characters (bidi overrides, zero-width
    characters, tags) would reach the terminal raw. What a program decodes from the
    result is what it decoded from ``data``."""
    text = data.decode("utf-8")
    if _plain(text):  # a JSON encoder's output has no line breaks of its own
        return data
    return _NOT_PLAIN.sub(_json_escape, text).encode("utf-8")


def _json_escape(m: re.Match[str]) -> str:
    ch = m.group()
    if not hidden(ch):
        return ch
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
