"""A server's text set apart from mcpd's, where mcpd passes it on in words of its own
(the servers' instructions, what a server asks an agent's user).

mcpd's own lines name the server; every line of the server's text is quoted (``> ``),
so the server cannot end its part early or write a line that reads as mcpd's, and a
line of it that would read as a heading (``# ...``, or a line of ``=`` or ``-`` under
another) is escaped. The text is cleaned first (``clean``): its only line breaks are
line feeds.
"""

from __future__ import annotations

from typing import Final

QUOTE: Final = "> "


def quoted(line: str) -> str:
    """A line of a server's text as it is shown: quoted, and never a heading."""
    bare = line.lstrip(" \t")
    if bare.startswith("#") or (len(bare) >= 2 and set(bare.rstrip()) <= {"=", "-"}):
        line = line[: len(line) - len(bare)] + "\\" + bare
    return (QUOTE + line).rstrip() if line.strip() else QUOTE.rstrip()


def quoted_lines(text: str) -> list[str]:
    """Every line of ``text``, quoted."""
    return [quoted(line) for line in text.split("\n")]
