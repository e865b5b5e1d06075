"""What a process runs, in a few words a person knows it by: for the refusal that
tells someone their terminal ran an agent of mcpd's (``own_methods.persons_only``).

What a process's command line says is the process's own to write: these words only
name it to a person, and decide nothing.
"""

from __future__ import annotations

import os
from typing import Final

from protocol.visible import visible

# As much of a command line as is read: the program and the words after it.
_READ: Final = 4096
_LONGEST: Final = 40
_MCPD: Final = "mcpd"


def command_of(pid: int) -> str | None:
    """What process ``pid`` runs as its command line says now: ``mcpd call`` (or the
    command of mcpd's it is) for mcpd's own command line, run as its script or as
    ``python -m mcpd``; else its program's name. None where unread."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(_READ)
    except OSError:
        return None
    argv = [w.decode(errors="replace") for w in raw.split(b"\0") if w]
    if not argv:
        return None
    return _shown(_of_mcpd(argv) or os.path.basename(argv[0]))


def name_of(pid: int) -> str | None:
    """The name the kernel gives process ``pid`` (its program's, as ``ps`` shows it);
    None where unread."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            name = f.read(_READ).decode(errors="replace").strip()
    except OSError:
        return None
    return _shown(name) if name else None


def _of_mcpd(argv: list[str]) -> str | None:
    """``mcpd`` and its command, where ``argv`` runs mcpd's command line."""
    for at, word in enumerate(argv[:3]):
        by_module = word == "-m" and argv[at + 1 : at + 2] == [_MCPD]
        if os.path.basename(word) == _MCPD or by_module:
            rest = argv[at + 2 if by_module else at + 1 :]
            command = rest[0] if rest and rest[0].isalpha() else None
            return f"{_MCPD} {command}" if command else _MCPD
    return None


def _shown(words: str) -> str:
    words = visible(words)
    return words if len(words) <= _LONGEST else words[: _LONGEST - 1] + "…"
