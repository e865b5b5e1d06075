"""Words from a server, an agent or a config as the page writes them: each character
that hides or reorders what a person reads (a bidi override, a zero-width character,
a tag, a control) written out as ``mcpd status`` writes it, then escaped for HTML, so
that what the page shows is what the text holds and no markup of anyone's."""

from __future__ import annotations

from html import escape

from protocol.shown.visible import visible


def on_page(text: str) -> str:
    """``text`` for the page, as element content or a quoted attribute's value. Its line
    breaks and tabs are kept (a diff is shown line by line)."""
    return escape(visible(text, lines=True))


def cut_short(text: str, limit: int) -> str:
    """``text`` cut to its first ``limit`` characters and an ellipsis, where it is
    longer: a name that the commands show whole."""
    return text if len(text) <= limit else text[:limit] + "\u2026"
