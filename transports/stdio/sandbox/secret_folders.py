"""The directories of the config file and of the secret files it reads, hidden whole.

A file is hidden by binding ``/dev/null`` onto it as the server starts, which covers
that file only: one renamed onto its name later (an editor saving, ``sed -i``, a
credential tool writing afresh) or created there after the server started is another
file, which the running server reads. So where the server needs nothing in a secret
file's directory, the directory is hidden instead (an empty read-only one, as mcpd's
own config directory is), and what is put there later is hidden with it.

A server needs a directory that is ``/``, that lies in a system directory, or that
holds (or is) a place it sees: the user's home, its working directory, its command,
a path its arguments name, a grant, its own home, a place every process shares
(``/tmp``). There the file alone is hidden, as it is when it starts; what each
covered file was then (its device and inode, or that it was missing) is kept
(``PathIdentity``), and a reload restarts the servers whose files changed since
(``changed``). mcpd says so once for each such file (``MCPD_EVENT=sandbox_exposed``),
and ``mcpd check-config`` too. No trio here.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Sequence
from typing import Final

import msgspec

from protocol.shown.logfields import log_extra

from ...path_identity import PathIdentity
from ..process.launch import in_workdir
from .hidden_links import SYSTEM_DIRS
from .plan import Sandbox, SeenPlace, within

logger = logging.getLogger("mcpd.stdio")
# Whatever lies in these is the system's, which servers run on.
_SYSTEM: Final = (*SYSTEM_DIRS, "/boot", "/proc", "/sys", "/dev")
# Places every process shares: none is hidden, nor a directory above one.
_SHARED: Final = ("/tmp", "/var/tmp", "/dev/shm", "/run", "/home", "/root")
# Symbolic links followed from a secret file's name, as many as the kernel follows.
_HOPS: Final = 40
_MISSING: Final = "it does not exist as the server starts"
_said: set[str] = set()


class UnhiddenSecret(msgspec.Struct, frozen=True):
    """A secret file (or the config file) whose directory cannot be hidden, and why."""

    file: str
    folder: str
    why: str
    # Its directory is missing: nothing there to read yet, and nothing said of it; a
    # reload restarts the server once the file is there (``changed``).
    missing: bool = False


class SecretHiding(msgspec.Struct, frozen=True):
    folders: tuple[str, ...]  # hidden whole
    exposed: tuple[UnhiddenSecret, ...]  # each file hidden alone


def split_secrets(sandbox: Sandbox, command: str, cwd: str) -> SecretHiding:
    """Which directories of ``sandbox.secrets`` are hidden whole from a server that runs
    ``command`` (resolved) in ``cwd`` (its home when empty), and which files are not."""
    if sandbox.level == "off":
        return SecretHiding((), ())
    sees = _sees(sandbox, command, cwd)
    folders: list[str] = []
    exposed: list[UnhiddenSecret] = []
    for file in sandbox.secrets:
        if sandbox.level == "strict" and not _strictly_shown(file, sandbox):
            continue  # outside what a strict sandbox shows at all
        for folder in folders_of(file):
            if not os.path.isdir(folder):
                exposed.append(UnhiddenSecret(file, folder, _MISSING, missing=True))
                continue
            why = _why_shown(folder, sees)
            if why is None:
                folders.append(folder)
            else:
                exposed.append(UnhiddenSecret(file, folder, why))
    return SecretHiding(tuple(dict.fromkeys(folders)), tuple(dict.fromkeys(exposed)))


def folders_of(file: str) -> list[str]:
    """The real directories a rename in would change what ``file`` reads: the one its
    name is in, as the kernel finds it (``link/..`` is the parent of the link's
    target), and, where that name is a symbolic link, the one each link on the way to
    the file is in, and the file's own."""
    out: list[str] = []
    path = file
    for _ in range(_HOPS):
        folder = os.path.realpath(os.path.dirname(path))
        out.append(folder)
        try:
            target = os.readlink(os.path.join(folder, os.path.basename(path)))
        except OSError:
            break  # not a link (or missing): the file is in ``folder``
        path = os.path.join(folder, target)
    return list(dict.fromkeys(out))


def _sees(sandbox: Sandbox, command: str, cwd: str) -> list[SeenPlace]:
    where = sandbox.where
    out = list(sandbox.sees)
    if "/" in command:  # a bare name not found on PATH is no place
        out.append(
            SeenPlace(in_workdir(command, cwd or None, sandbox.home), f"the command of {where}")
        )
    out.append(SeenPlace(cwd or sandbox.home, f"the working directory of {where}"))
    out.append(SeenPlace(sandbox.home, f"the home of {where}"))
    for key, paths in (("read", sandbox.read), ("write", sandbox.write)):
        out += [SeenPlace(p, f"{where}.{key}[{i}]") for i, p in enumerate(paths)]
    out += [SeenPlace(p, f"{p}, which every process shares") for p in _SHARED]
    return out


def _spellings(path: str) -> set[str]:
    return {os.path.normpath(path), os.path.realpath(path)}


def _why_shown(folder: str, sees: Sequence[SeenPlace]) -> str | None:
    """Why the server needs ``folder`` (None: it needs nothing in it)."""
    names = _spellings(folder)
    if "/" in names:
        return "it is /"
    try:
        st = os.stat(folder)
    except OSError:
        st = None
    if st is None or not stat.S_ISDIR(st.st_mode):
        return _MISSING
    if st.st_uid not in (os.geteuid(), 0):
        return f"it is another user's (uid {st.st_uid}), which mcpd does not hide"
    for name in names:
        for system in _SYSTEM:
            if within(name, system):
                return f"it lies in {system}, a system directory"
    for seen in sees:
        for place in _spellings(seen.path):
            if any(within(place, name) for name in names):
                return f"it holds {seen.what} ({seen.path})"
    return None


def _strictly_shown(file: str, sandbox: Sandbox) -> bool:
    roots = [*SYSTEM_DIRS, *sandbox.read, *sandbox.write, "/tmp"]
    return any(within(name, root) for name in _spellings(file) for root in roots)


def identities(split: SecretHiding) -> tuple[PathIdentity, ...]:
    """What each file hidden alone, and each directory hidden whole, is now."""
    paths = [*(e.file for e in split.exposed), *split.folders]
    return tuple(_identity(p) for p in paths)


def _identity(path: str) -> PathIdentity:
    try:
        st = os.stat(path)
    except OSError:
        return PathIdentity(path, None)
    return PathIdentity(path, (st.st_dev, st.st_ino))


def changed(covered: Iterable[PathIdentity]) -> list[str]:
    """Those of ``covered`` that are another file now (replaced, created, removed)."""
    return [c.path for c in covered if _identity(c.path) != c]


# What to do of such a file, where it can be moved.
KEEP_APART: Final = "keep such a file in a directory of its own"


def warning(exposed: UnhiddenSecret, remedy: str = KEEP_APART) -> str:
    """What mcpd says of a file whose directory cannot be hidden from a server, ending
    with ``remedy``."""
    return (
        f"{exposed.file} is hidden from a sandboxed server as it is when the server starts, "
        f"but its directory {exposed.folder} cannot be hidden: {exposed.why}; a running server "
        "can read what is renamed onto that name (an editor saving, sed -i) or created "
        f"there, until a reload restarts it: {remedy}"
    )


def say(split: SecretHiding, sandbox: Sandbox) -> None:
    """Say, once for each, the files a server starting now could come to read."""
    for exposed in split.exposed:
        if exposed.missing:
            continue
        said = warning(exposed)
        if said in _said:
            continue
        _said.add(said)
        logger.warning(
            "%s: %s",
            sandbox.alias,
            said,
            extra=log_extra(sandbox.alias, "sandbox_exposed", said),
        )
