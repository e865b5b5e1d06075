"""A key of a host's server entry that neither mcpd nor the host's own dialect reads.

Most are the host's own (a UI setting, a key of a newer version): noted and left out.
One a letter away from a key mcpd reads (``"arg"`` for ``"args"``) is a slip, whose
value the server would otherwise run without: the note says which key was meant,
and a file served as mcpd's config is refused on it, as a TOML config is.
"""

from __future__ import annotations

import difflib
from typing import Final

# The keys of a server entry the importer reads.
READ: Final = frozenset(
    {"type", "command", "args", "env", "cwd", "envFile", "url", "headers", "disabled"}
    | {"oauth", "auth"}
)
# Closer than two keys of the hosts' own are to each other ("enabled" to "disabled"):
# a letter added or dropped, in a key of three letters or more.
_SLIP: Final = 0.85


def unknown_key(where: str, key: str, misspelt: list[str]) -> str:
    """The note on ``key``; one that is a slip is also added to ``misspelt``."""
    near = difflib.get_close_matches(key, sorted(READ), n=1, cutoff=_SLIP)
    if not near:
        return f"{where}.{key}: unknown key; not imported"
    said = f'{where}.{key}: unknown key; did you mean "{near[0]}"?'
    misspelt.append(said)
    return f"{said} (not imported)"
