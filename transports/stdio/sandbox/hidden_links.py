"""How a hidden path is followed through symbolic links, and where a link may lead.

A hidden path is followed only through symbolic links that mcpd's user or root owns,
and is hidden only when one of them owns what lies at it (or a link of theirs leads
there): anyone may make a name in ``/tmp`` before the user's program does, and a link
there would otherwise choose what every server cannot see (``/usr``, and none starts;
a directory of the user's, and the servers lose it). Another user's name is left as
it is, hiding nothing (``anchors`` says whose it is). In a directory such as ``/tmp``
(sticky) only a name's owner or root can move it, so one found to be mcpd's user's or
root's cannot be swapped for another user's before bubblewrap mounts on it.

A sandboxed server runs as mcpd's user, so a link it makes at a hidden name that was
free (``~/.kube``, pointing at ``/usr``) passes that test. What a link leads to is
therefore hidden only where servers need nothing of it: never the root or a
directory at its top, what lies in the system's directories (``/usr``, ``/etc``, the
kernel's), a home of mcpd's user's or a directory above one, nor what holds a place
the server starting runs or works in (``Needed``) where its config names that place
itself. A credential store the user keeps elsewhere through a link (``~/.aws`` to
``/data/aws``) is none of those, and stays hidden.

A server can make links on the way to what it runs or works in as well (its working
directory swapped for a link into that store): such a place spares nothing, and is
said instead (``reaching``), for the server's start to be refused. No trio here.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from .plan import within

# The symbolic links followed on the way to one path, as many as the kernel follows.
_HOPS: Final = 40
# The system's directories a strict sandbox shows read-only, where they exist.
SYSTEM_DIRS: Final = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
)
# The machine's own directories: what lies in them is the system's, which every server
# needs, and never a store of the user's.
_SYSTEM: Final = (*SYSTEM_DIRS, "/boot", "/proc", "/sys", "/dev")


class Needed(msgspec.Struct, frozen=True):
    """A place the server starting needs, which no link at a hidden name may hide:
    neither it nor a directory above it."""

    path: str  # real
    what: str  # as said when a link leads there ("the command of servers.files")
    # As the config names it, when a symbolic link on the way leads elsewhere: a
    # sandboxed server may have made that link, so it says nothing of what to spare.
    given: str | None = None


class Followed(msgspec.Struct, frozen=True):
    """Where a hidden path leads, and the first symbolic link on the way, if any."""

    path: str
    link: str | None = None


class Theirs(msgspec.Struct, frozen=True):
    """A name on the way to a hidden path that another user owns."""

    name: str
    uid: int
    kind: Literal["symbolic link", "directory", "file"]
    link: str | None = None  # what a symbolic link points to


def follow(path: str) -> Followed | Theirs:
    """``path`` with every symbolic link on the way followed, as ``os.path.realpath``
    finds it, or the first name on the way another user owns: a link, or what lies at
    the path itself, unless a link of mcpd's user or root led there (they chose it)."""
    done = "/"
    path = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    todo = [(part, False) for part in reversed(path.split("/")) if part not in ("", ".")]
    linked = False  # whether the last name came from a trusted link
    first: str | None = None  # the first link followed
    hops = 0
    while todo:
        part, linked = todo.pop()
        if part == "..":
            done = os.path.dirname(done)
            continue
        here = os.path.join(done, part)
        try:
            st = os.lstat(here)
            target = os.readlink(here) if stat.S_ISLNK(st.st_mode) else None
        except OSError:
            # Missing, or not for mcpd to look into: nothing there to hide.
            return Followed(os.path.join(here, *[p for p, _ in reversed(todo)]), first)
        if target is None:
            done = here
            continue
        if not _trusted(st.st_uid):
            return Theirs(here, st.st_uid, "symbolic link", target)
        first = first or here
        hops += 1
        if hops > _HOPS:
            return Followed(here, first)  # a loop, which the kernel would not follow either
        done = "/" if target.startswith("/") else done
        todo += [(p, True) for p in reversed(target.split("/")) if p not in ("", ".")]
    if not linked:
        try:
            st = os.lstat(done)
        except OSError:
            return Followed(done, first)  # gone since: nothing there to hide
        if not _trusted(st.st_uid):
            directory = stat.S_ISDIR(st.st_mode)
            return Theirs(done, st.st_uid, "directory" if directory else "file")
    return Followed(done, first)


def needed(real: str, needs: Sequence[Needed] = ()) -> str | None:
    """Why hiding ``real`` would take what every server needs, or what the server
    starting ``needs`` (a clause: "lies in /usr, ..."); None when it would not."""
    if real.count("/") <= 1:
        return "is the root or a directory at its top"
    for system in _SYSTEM:
        if within(real, system):
            return f"lies in {system}, one of the system's directories"
    for home in _homes():
        if within(home, real):
            return f"is or holds the home of mcpd's user ({home})"
    for need in needs:
        if need.given is None and within(need.path, real):
            return f"is or holds {need.what} ({need.path})"
    return None


def reaching(real: str, needs: Sequence[Needed]) -> Needed | None:
    """The first of ``needs`` that lies in ``real`` through a symbolic link on its own
    way (``Needed.given``), which hiding ``real`` would take from the server starting."""
    return next((n for n in needs if n.given is not None and within(n.path, real)), None)


def spared(found: Followed) -> bool:
    """Whether a link chose ``found`` where every server needs it, so it hides nothing."""
    return found.link is not None and needed(found.path) is not None


def _homes() -> list[str]:
    """mcpd's user's home, and ``$HOME`` when that is another directory, as real paths."""
    homes = {os.environ.get("HOME", "")}
    with contextlib.suppress(KeyError):  # a user without an entry: $HOME alone is theirs
        homes.add(pwd.getpwuid(os.geteuid()).pw_dir)
    return sorted({os.path.realpath(h) for h in homes if h})


def _trusted(uid: int) -> bool:
    return uid in (os.geteuid(), 0)
