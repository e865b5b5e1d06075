"""Values a sentence of mcpd's must not show, each written as its stand-in instead.

A config error quotes what the config says (a URL, a size, an address), and what it
says may hold a value spliced in from ``${VAR}`` or a secret file: a password.
Whoever reads the error (the operator's terminal, the journal, each agent that asks
a daemon holding a bad config) reads the reference, ``${API_TOKEN}``, instead. The
value goes before its text is escaped, cut or taken apart for the sentence: after
that it is no longer there to be found whole (a quote escaped in it, a cut in its
middle, a URL shown only up to its query). So while ``masking`` is in force, what
shapes a text for a sentence (``visible.quote``, ``server_urls.display_url``) masks it
first, as does whatever writes a value into a sentence itself (``masked_repr``); a
sentence that holds a value as it is, unescaped, can be masked whole (``masked``).

The values come from the one who sets them, never from a server. They are in force
within the ``with`` block for the task that entered it (and a task it starts there,
which takes a copy of its context), never for another task running meanwhile.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Final

_IN_FORCE: Final[ContextVar[Mapping[str, str] | None]] = ContextVar("masked values", default=None)


@contextlib.contextmanager
def masking(stand_ins: Mapping[str, str]) -> Iterator[None]:
    """Within it, each key of ``stand_ins`` is written as its value by ``masked``."""
    # An empty value is in every text and hides nothing.
    token = _IN_FORCE.set({value: shown for value, shown in stand_ins.items() if value})
    try:
        yield
    finally:
        _IN_FORCE.reset(token)


def masked(text: str) -> str:
    """``text`` with each value in force written as its stand-in. Where two values
    overlap in it, both stand-ins are written, so no character of either is left; a
    run of one value overlapping itself is written as one."""
    stand_ins = _IN_FORCE.get()
    if not stand_ins:
        return text
    found: list[tuple[int, int, str]] = []
    for value, stand_in in stand_ins.items():
        at = text.find(value)
        while at >= 0:
            found.append((at, at + len(value), stand_in))
            at = text.find(value, at + 1)
    if not found:
        return text
    parts: list[str] = []
    shown_to = 0  # what comes before is written
    # At one place the longest first, so a value inside another is left in its stand-in.
    for start, end, stand_in in sorted(found, key=lambda f: (f[0], -f[1])):
        if end <= shown_to:
            continue
        if start < shown_to and parts and parts[-1].endswith(stand_in):
            shown_to = end  # the same value again, overlapping the last
            continue
        parts.append(text[shown_to:start] + stand_in)
        shown_to = end
    return "".join(parts) + text[shown_to:]


def masked_repr(value: object) -> str:
    """``value`` as Python writes it (``repr``), a string masked first."""
    return repr(masked(value) if isinstance(value, str) else value)
