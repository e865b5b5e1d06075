"""What the kernel opens to run a server's command, found on the host for a strict
sandbox to be checked against (``strict_view``): where the symbolic links on the way
lead, and the interpreter a script's ``#!`` line names. No trio here, and nothing that
waits: a start is checked on the thread that serves every agent, so no file is opened
in a way that could block it."""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import Final

from .strict_view import OpenedToRun

# The symbolic links followed on the way to one file, as many as the kernel follows.
_HOPS: Final = 40
# What the kernel reads of a script for its ``#!`` line (BINPRM_BUF_SIZE).
_SHEBANG: Final = 256
# What the kernel skips before an interpreter's name, and what ends the name: no other
# blank does (a vertical tab is part of the name).
_BLANK: Final = b" \t"
_NAME_END: Final = re.compile(rb"[ \t\0]")


def opened_by(command: str, cwd: str) -> tuple[OpenedToRun, ...]:
    """What the kernel opens to run ``command`` (found) besides the command as found:
    the command where it lies, when a link to a folder is on the way to it (a granted
    folder's link is shown, not where it leads), where each symbolic link on the way
    leads, and the interpreter its ``#!`` line names (taken from ``cwd`` when relative,
    as the kernel does), with where each link on the way to that leads. One ``#!`` is
    followed: an interpreter that is a script itself is rare. Raises OSError for a
    command that is no regular file (``unrunnable``) by the time it is read."""
    placed = _spellings(command)[1:]
    how = f"its command {command} lies there, through a link to a folder on the way"
    out = [OpenedToRun(p, how, *grant_folder(p)) for p in placed]
    how = f"its command {command} is a link that leads there"
    out += [OpenedToRun(p, how, *grant_folder(p)) for p in _hops(command)]
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


# What a file that is not a regular one is, by its type, in the words of an error.
_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def unrunnable(path: str, mode: int) -> OSError | None:
    """Why the file at ``path``, of ``mode``, is no program the kernel runs: None for a
    regular file. Said as an OSError of its own (not a PermissionError, which a start
    reports as a file that is not executable)."""
    if stat.S_ISREG(mode):
        return None
    kind = next((words for test, words in _KINDS if test(mode)), "no regular file")
    why = f"{path} is {kind}, not a regular file the kernel can run"
    return OSError(errno.ENOEXEC, why, path)


def _shebang(path: str) -> str | None:
    """The interpreter the ``#!`` line of the file at ``path`` names, as written.
    OpenedToRun without waiting (a FIFO put there would block an open for reading until
    someone writes it) and without following a link (``path`` is a real path: a link
    there now was put there since), and read only once it is a regular file. Raises
    OSError (``unrunnable``) for one that is not."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            why = f"{path} became a symbolic link as it was read"
            raise OSError(errno.ENOEXEC, why, path) from None
        return None  # unreadable: the exec says why, as it would outside a sandbox
    try:
        refused = unrunnable(path, os.fstat(fd).st_mode)
        if refused is not None:
            raise refused
        head = os.read(fd, _SHEBANG)
    finally:
        os.close(fd)
    if not head.startswith(b"#!"):
        return None
    line, ended, _ = head[2:].partition(b"\n")
    name = line.lstrip(_BLANK)
    if not ended and len(head) == _SHEBANG and name and not _NAME_END.search(name):
        # The kernel refuses it too: what it read of the name may be cut short.
        why = (
            f"the #! line of {path} is too long for the kernel, which reads only its first "
            f"{_SHEBANG} bytes, before the name of its interpreter ends"
        )
        raise OSError(errno.ENOEXEC, why, path)
    name = _NAME_END.split(name, maxsplit=1)[0]
    return os.fsdecode(name) if name else None
