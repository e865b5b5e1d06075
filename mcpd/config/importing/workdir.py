"""A server's relative ``cwd`` in another host's file, made absolute or left out.

A host hands a relative working directory to the system as it is, so it is taken from
the folder the host itself runs in. That folder is known for a file that belongs to a
project: a workspace file names it (the project of ``.mcp.json``, ``.vscode/mcp.json``,
a project of ``~/.claude.json``), and Gemini CLI reads ``.gemini/settings.json`` from
the folder it is started in. For a user's own file it could be any folder: such a
``cwd`` is left out, with a note, as mcpd takes a working directory only as an
absolute path (a relative one would be taken from wherever mcpd runs).
"""

from __future__ import annotations

import os
from pathlib import Path

from .jsonc import quoted_or_sized


def started_in(source: str) -> str | None:
    """The folder the host runs in when it reads ``source``, where it says so by
    itself: a Gemini CLI project's (not the user's own ``~/.gemini``)."""
    p = Path(os.path.abspath(source))
    if p.parent.name == ".gemini" and str(p.parent.parent) != os.path.expanduser("~"):
        return str(p.parent.parent)
    return None


def absolute_cwd(cwd: str, folder: str | None, where: str, notes: list[str]) -> dict[str, str]:
    """The server table's ``cwd`` key for ``cwd`` as mcpd writes it (``$`` escaped):
    an absolute path or a reference as it is, a relative path joined to ``folder``,
    none when ``folder`` is unknown."""
    if cwd.startswith("/") or (cwd.startswith("$") and not cwd.startswith("$$")):
        return {"cwd": cwd}
    if folder is None:
        notes.append(
            f"{where}.cwd: {quoted_or_sized(cwd)} is relative to the folder the host was "
            "started in, which the file does not say; not imported (give cwd as an absolute "
            "path)"
        )
        return {}
    joined = os.path.normpath(os.path.join(folder.replace("$", "$$"), cwd))
    notes.append(
        f"{where}.cwd: {quoted_or_sized(cwd)} is relative to the host's folder: imported as "
        f"{quoted_or_sized(joined)}"
    )
    return {"cwd": joined}
