"""A process in words a person knows it by, for the refusal that tells someone their
terminal ran an agent of mcpd's (``own_methods.persons_only``): the program the kernel
says it runs, and where its command line reads as mcpd's own (``mcpd call``), which
command.

A command line is the process's own to write, so it is given as what the command line
read, beside the program the kernel names; neither decides anything.
"""

from __future__ import annotations

import os
from typing import Final

from protocol.shown.visible import visible

# As much of a command line as is read: the program and the words after it.
_READ: Final = 4096
_LONGEST: Final = 40
_MCPD: Final = "mcpd"


def program_of(pid: int) -> str | None:
    """The name of the program the kernel says process ``pid`` runs (``/proc/PID/exe``);
    None where unread."""
    try:
        return _shown(os.path.basename(os.readlink(f"/proc/{pid}/exe")))
    except OSError:
        return None


def program_run_as(pid: int, uid: int | None) -> str | None:
    """``program_of`` ``pid`` where it runs as ``uid``; None where it runs as another
    user (whose programs are not told: it may have run a setuid one since) or unread."""
    try:
        if uid is None or os.stat(f"/proc/{pid}").st_uid != uid:
            return None
    except OSError:
        return None
    return program_of(pid)


def mcpd_command_of(pid: int) -> str | None:
    """``command_of_mcpd`` of process ``pid``'s command line; None where unread."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(_READ)
    except OSError:
        return None
    return command_of_mcpd([w.decode(errors="replace") for w in raw.split(b"\0") if w])


def command_of_mcpd(argv: list[str]) -> str | None:
    """``mcpd call`` (or whichever command of mcpd's it is) where ``argv`` reads as
    mcpd's command line, run as its script (by an interpreter or not) or as ``python -m
    mcpd``; else None."""
    for at, word in enumerate(argv[:3]):
        by_module = word == "-m" and argv[at + 1 : at + 2] == [_MCPD]
        if os.path.basename(word) == _MCPD or by_module:
            rest = argv[at + 2 if by_module else at + 1 :]
            command = rest[0] if rest and rest[0].isalpha() else None
            if command in _LISTINGS:
                # The flag that made a person's listing a program's, and so an agent's.
                flag = next((_flag(w) for w in rest[1:] if _flag(w)), None)
                command = f"{command} {flag}" if flag else command
            return _shown(f"{_MCPD} {command}" if command else _MCPD)
    return None


# mcpd's listings: a person's table, or (with one of ``_FOR_PROGRAMS``) a program's.
_LISTINGS: Final = frozenset({"tools", "prompts", "resources"})
_FOR_PROGRAMS: Final = ("--json", "--format")


def _flag(word: str) -> str | None:
    """``--json`` or ``--format`` where ``word`` is that flag (``--format=x`` too)."""
    return next((f for f in _FOR_PROGRAMS if word == f or word.startswith(f + "=")), None)


def _shown(words: str) -> str:
    words = visible(words)
    return words if len(words) <= _LONGEST else words[: _LONGEST - 1] + "…"
