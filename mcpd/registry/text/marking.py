"""A server's mark on every line of its text that could pass for someone else's.

mcpd marks what a server writes with the server's name in brackets (``[gh] Merge a
pull request.``), and writes its own notices the same way (``[mcpd] ...``, an outage's
``[unavailable: ...]``). A mark at the start of a text only covers its first line: a
later line of the server's that begins with a bracket could read as mcpd's notice or
as another server's text. So each such line gets the server's mark in front as well,
and every bracketed mark a line starts with is mcpd's or the one of the server that
wrote it. The fields a host shows as one line (titles, names) get no lines at all:
their line breaks become spaces.

Both run in time linear in the text: a check for a bracket or a line break first, then
one pass of a pattern whose only quantifier is possessive over blanks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from .clean import clean_text

# What opens a bracket: Unicode's opening punctuation (category Ps), as ``[`` has many
# look-alikes (its fullwidth form, white and lenticular brackets, quill brackets...);
# except the parenthesis and the brace, which begin lines of examples and of JSON and
# look like no mark.
OPENING: Final = (
    "\u0f3a\u0f3c\u169b\u201a\u201e\u2045\u207d\u208d\u2308\u230a\u2329\u2768"
    "\u276a\u276c\u276e\u2770\u2772\u2774\u27c5\u27e6\u27e8\u27ea\u27ec\u27ee"
    "\u2983\u2985\u2987\u2989\u298b\u298d\u298f\u2991\u2993\u2995\u2997\u29d8"
    "\u29da\u29fc\u2e22\u2e24\u2e26\u2e28\u2e42\u2e55\u2e57\u2e59\u2e5b\u3008"
    "\u300a\u300c\u300e\u3010\u3014\u3016\u3018\u301a\u301d\ufd3f\ufe17\ufe35"
    "\ufe37\ufe39\ufe3b\ufe3d\ufe3f\ufe41\ufe43\ufe47\ufe59\ufe5b\ufe5d\uff08"
    "\uff3b\uff5b\uff5f\uff62["
)
# What may stand before it and show nothing: blanks, the blank letters of Braille and
# Hangul, and combining marks, which a line's first character has nothing to join.
_BLANK: Final = (
    "(?:[^\\S\n]|[\u2800\u115f\u1160\u3164\uffa0\u0300-\u036f\u1ab0-\u1aff"
    "\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f])"
)
_BRACKET: Final = re.compile(f"[{re.escape(OPENING)}]")
# A line that begins, after what shows nothing, with a bracket.
_LATER_LINE: Final = re.compile(f"\n({_BLANK}*+)(?={_BRACKET.pattern})")
_ANY_LINE: Final = re.compile(f"(?:^|(?<=\n))({_BLANK}*+)(?={_BRACKET.pattern})")
# Every line break a reader may take for one (what ``clean`` turns into line feeds).
_BREAK: Final = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _has_bracket(text: str) -> bool:
    return _BRACKET.search(text) is not None


def _marking(alias: str, before: str) -> Callable[[re.Match[str]], str]:
    """What a line found is replaced by: the mark in front of it (before its blanks),
    unless it is the server's own mark already, so a text marked twice on its way to
    an agent reads as marked once."""
    mark = f"[{alias}] "

    def marked(found: re.Match[str]) -> str:
        if found.string.startswith(mark, found.end()):
            return found.group(0)
        return f"{before}{mark}{found.group(1)}"

    return marked


def later_lines_marked(alias: str, text: str) -> str:
    """``text``, whose first line starts with a mark of mcpd's making, with ``alias``'s
    mark in front of every later line that begins with a bracket."""
    if "\n" not in text or not _has_bracket(text):
        return text
    return _LATER_LINE.sub(_marking(alias, "\n"), text)


def lines_marked(alias: str, text: str) -> str:
    """``text`` with ``alias``'s mark in front of every line, the first too, that
    begins with a bracket."""
    if not _has_bracket(text):
        return text
    return _ANY_LINE.sub(_marking(alias, ""), text)


def breaks_as_spaces(text: str) -> str:
    """``text`` with each of its line breaks made a space."""
    if text.isprintable():
        return text
    return _BREAK.sub(" ", text)


def server_words(alias: str, text: str) -> str:
    """A text of the server's that mcpd passes on with no mark in front (a progress
    report's message): cleaned, each line that begins with a bracket marked."""
    return lines_marked(alias, clean_text(text)[0])


def as_listed(alias: str, text: str) -> str:
    """A description as listed (a state's marker aside): the mark in front, and on
    every later line that begins with a bracket."""
    return later_lines_marked(alias, f"[{alias}] {text}".rstrip())


def said_by(alias: str, text: str) -> str:
    """A cleaned text of the server's with its mark in front, on every line that
    could pass for another's too (once: a text marked already is left as it is)."""
    mark = f"[{alias}] "
    return later_lines_marked(alias, text if text.startswith(mark) else mark + text)
