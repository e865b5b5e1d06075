"""What the kernel opens to run a server's command, found on the host for a strict
sandbox to be checked against (``strict_view``): where the symbolic links on the way
lead, and the interpreter a script's ``#!`` line names. No trio here."""

from __future__ import annotations

import os
from typing import Final

from .strict_view import OpenedToRun

# The symbolic links followed on the way to one file, as many as the kernel follows.
_HOPS: Final = 40
# What the kernel reads of a script for its ``#!`` line (BINPRM_BUF_SIZE).
_SHEBANG: Final = 256


def opened_by(command: str, cwd: str) -> tuple[OpenedToRun, ...]:
    """What the kernel opens to run ``command`` (found) besides the command as found:
    where each symbolic link on the way leads, and the interpreter its ``#!`` line
    names (taken from ``cwd`` when relative, as the kernel does), with where each link
    on the way to that leads. One ``#!`` is followed: an interpreter that is a script
    itself is rare."""
    how = f"its command {command} is a link that leads there"
    out = [OpenedToRun(p, how, *grant_folder(p)) for p in _hops(command)]
    interpreter = _shebang(os.path.realpath(command))
    if interpreter is not None:
        interpreter = os.path.join(cwd, interpreter)
    # One that is not there fails the exec outside a sandbox as well, and says so.
    if interpreter is not None and os.path.exists(interpreter):
        how = f"the #! line of {command} names {interpreter} to run it"
        out += [OpenedToRun(p, how, *grant_folder(p)) for p in _spellings(interpreter)]
        how += ", a link that leads there"
        out += [OpenedToRun(p, how, *grant_folder(p)) for p in _hops(interpreter)]
    return tuple(dict.fromkeys(out))


def installation_of(command: str) -> str | None:
    """The installation ``command`` lies in (``grant_folder``), if it lies in one."""
    folder, installed = grant_folder(command)
    return folder if installed else None


def _placed(path: str) -> str:
    """``path`` in its folder's real path: where a sandbox must show it."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _spellings(path: str) -> list[str]:
    """``path`` as the kernel is given it, and where it lies when a link to a folder
    is on the way: a strict sandbox must show both, since it holds no link but the
    system's and those of grants as the config writes them."""
    return list(dict.fromkeys([os.path.normpath(path), _placed(path)]))


def _hops(path: str) -> list[str]:
    """Where each symbolic link on the way from ``path`` to a file leads: as the link
    says (from its own folder, when relative) and placed (``_spellings``)."""
    found: list[str] = []
    here = _placed(path)
    for _ in range(_HOPS):
        try:
            target = os.readlink(here)
        except OSError:
            break
        spellings = _spellings(os.path.join(os.path.dirname(here), target))
        found += spellings
        here = spellings[-1]
    return found


def grant_folder(path: str) -> tuple[str, bool]:
    """The folder to grant for the file at ``path``: the installation it lies in
    (``X`` for ``X/bin/tool`` beside ``X/lib``, a virtualenv or a Python), whose
    libraries it needs as well, else its own folder; and whether it is the first."""
    folder = os.path.dirname(path)
    above = os.path.dirname(folder)
    if os.path.basename(folder) == "bin" and above != "/" and os.path.isdir(f"{above}/lib"):
        return above, True
    return folder, False


def _shebang(path: str) -> str | None:
    """The interpreter the ``#!`` line of the file at ``path`` names, as written."""
    try:
        with open(path, "rb") as f:
            head = f.read(_SHEBANG)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].split()
    return os.fsdecode(words[0]) if words else None
