"""Where each hidden path is now: a sandbox hides what a path named when mcpd first
hid it, wherever that has gone since, as well as what the path names now.

A sandboxed server cannot move what is hidden (``pins``), but the user can, a server
without a sandbox can, and a server can point a symbolic link on the way elsewhere:
the path then names something else, and what it named would be shown to the next
server started. So the first time a hidden path is found, mcpd keeps a descriptor of
what it names (``O_PATH``: it opens nothing for reading or writing), and at each start
after, asks the kernel where that is now. When it is not where it was, or the path
names something else, both are hidden, and the journal (``MCPD_EVENT=sandbox_moved``)
and ``mcpd status`` say so, until mcpd restarts. A hidden path removed is found
afresh. What mcpd cannot name again is a reason to start no sandboxed server.

A hidden path may be a pattern, with ``*`` in its last part only (``/tmp/ssh-*``, where
key agents make their sockets): it stands for what matches it as each server starts
and is owned by mcpd's user, and for what it matched before (followed as above), since
such places come and go while mcpd runs.

A hidden path is followed only through symbolic links that mcpd's user or root owns, and is
hidden only when one of them owns what lies at it (or a link of theirs leads there):
anyone may make a name in ``/tmp`` before the user's program does, and a link there
would otherwise choose what every server cannot see (``/usr``, and none starts; a
directory of the user's, and the servers lose it). Another user's name is left as it
is, hiding nothing, and said once in the journal (``MCPD_EVENT=sandbox_foreign``) and
in ``mcpd status`` for as long as it is there. In a directory such as ``/tmp``
(sticky) only a name's owner or root can move it, so one found to be mcpd's user's or
root's cannot be swapped for another user's before bubblewrap mounts on it.
No trio here.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import pwd
import stat
from typing import Final, Literal

import msgspec

from protocol.logfields import log_extra

from .sandbox import SandboxError

logger = logging.getLogger("mcpd.stdio")
_FLAGS: Final = os.O_PATH | os.O_CLOEXEC
# The symbolic links followed on the way to one path, as many as the kernel follows.
_HOPS: Final = 40


class _Held:
    """What a hidden path named when first found, and who was started with it there."""

    def __init__(self, fd: int, st: os.stat_result, place: str) -> None:
        self.fd = fd
        self.key = (st.st_dev, st.st_ino)
        self.place = place  # where it was
        self.started: list[str] = []  # the servers started while it was there
        self.said: set[tuple[str, str | None]] = set()


class _Theirs(msgspec.Struct, frozen=True):
    """A name on the way to a hidden path that another user owns."""

    name: str
    uid: int
    kind: Literal["symbolic link", "directory", "file"]
    link: str | None = None  # what a symbolic link points to


_held: dict[str, _Held] = {}
_notices: dict[str, str] = {}
_theirs: dict[str, str] = {}  # what is said of a hidden path another user holds


def places(path: str, alias: str) -> list[str]:
    """The real paths that hide ``path`` for the server ``alias`` starting now: what
    the path names now (unless another user holds it) and, when that is not it, where
    what it named is now. Empty when neither exists. Raises SandboxError when that
    cannot be named."""
    found = _follow(path)
    _say_whose(path, found if isinstance(found, _Theirs) else None, alias)
    real = found if isinstance(found, str) else None
    now = _key(real) if real is not None else None
    held = _held.get(path)
    where = _where(held, path) if held is not None else None
    if held is not None and where is None:  # removed: found afresh
        os.close(held.fd)
        del _held[path]
        _notices.pop(path, None)
        held = None
    if held is None:
        if real is None or now is None:
            return []
        _hold(path, real, alias)
        return [real]
    assert where is not None
    other = real if now is not None and now != held.key else None
    if where == held.place and other is None:
        if alias not in held.started:
            held.started.append(alias)
        _notices.pop(path, None)
        return [where if real is None else real]
    _say(path, held, where, other, alias)
    return [where] if other is None else [where, other]


def followed(path: str) -> str | None:
    """Where ``path`` leads, as ``places`` follows it, holding and saying nothing; None
    when another user holds a name on the way (nothing is hidden there)."""
    found = _follow(path)
    return found if isinstance(found, str) else None


def matching(pattern: str) -> list[str]:
    """The paths a hidden ``pattern`` stands for now: those that match it and are owned
    by mcpd's user, and those it matched before; ``pattern`` itself when it has no
    ``*``."""
    folder, name = os.path.split(pattern)
    if "*" not in name:
        return [pattern]
    found = {p for p in _held if os.path.dirname(p) == folder and _matches(p, name)}
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if _matches(entry.path, name) and _own(entry):
                    found.add(entry.path)
    except OSError:
        pass  # no such folder, or not one mcpd may list: nothing there to hide
    return sorted(found)


def _matches(path: str, name: str) -> bool:
    return fnmatch.fnmatchcase(os.path.basename(path), name)


def _own(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.stat(follow_symlinks=False).st_uid == os.geteuid()
    except OSError:
        return False


def notices() -> list[str]:
    """What ``mcpd status`` says of hidden paths that are not where they were, and of
    those another user holds."""
    return sorted([*_notices.values(), *_theirs.values()])


def release() -> None:
    """Forget every hidden path (for a test that starts afresh)."""
    for held in _held.values():
        os.close(held.fd)
    _held.clear()
    _notices.clear()
    _theirs.clear()


def _trusted(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def _follow(path: str) -> str | _Theirs:
    """``path`` with every symbolic link on the way followed, as ``os.path.realpath``
    finds it, or the first name on the way another user owns: a link, or what lies at
    the path itself, unless a link of mcpd's user or root led there (they chose it)."""
    done = "/"
    path = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    todo = [(part, False) for part in reversed(path.split("/")) if part not in ("", ".")]
    linked = False  # whether the last name came from a trusted link
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
            return os.path.join(here, *[p for p, _ in reversed(todo)])
        if target is None:
            done = here
            continue
        if not _trusted(st.st_uid):
            return _Theirs(here, st.st_uid, "symbolic link", target)
        hops += 1
        if hops > _HOPS:
            return here  # a loop, which the kernel would not follow either
        done = "/" if target.startswith("/") else done
        todo += [(p, True) for p in reversed(target.split("/")) if p not in ("", ".")]
    if not linked:
        try:
            st = os.lstat(done)
        except OSError:
            return done  # gone since: nothing there to hide
        if not _trusted(st.st_uid):
            directory = stat.S_ISDIR(st.st_mode)
            return _Theirs(done, st.st_uid, "directory" if directory else "file")
    return done


def _say_whose(path: str, theirs: _Theirs | None, alias: str) -> None:
    """Say, once, that another user holds the hidden ``path`` (``theirs``), as long as
    they do."""
    if theirs is None:
        _theirs.pop(path, None)
        return
    what = f"another user's {theirs.kind} (uid {theirs.uid}, {_user_name(theirs.uid)})"
    if theirs.link is not None:
        what += f" to {theirs.link}: mcpd does not follow it, and hides nothing in its place"
    else:
        what += ": mcpd leaves it as it is, and hides nothing in its place"
    said = f"{path} is {what}"
    if theirs.name != os.path.normpath(path):
        said = f"{path} lies through {theirs.name}, {what}"
    said += " (only its owner or root can remove it)"
    if _theirs.get(path) == said:
        return
    _theirs[path] = said
    logger.warning("%s: %s", alias, said, extra=log_extra(alias, "sandbox_foreign", said))


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "no user name"


def _key(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _hold(path: str, real: str, alias: str) -> None:
    try:
        fd = os.open(real, _FLAGS)
    except OSError:
        return  # gone since: nothing to hide, nothing to follow
    held = _Held(fd, os.fstat(fd), real)
    held.started.append(alias)
    _held[path] = held


def _where(held: _Held, path: str) -> str | None:
    """Where what ``path`` named is now; None when it was removed."""
    st = os.fstat(held.fd)
    if st.st_nlink == 0:
        return None
    try:
        place = os.readlink(f"/proc/self/fd/{held.fd}")
    except OSError as exc:
        raise SandboxError(f"cannot find where {path} (hidden) is now: {exc.strerror}") from None
    # The kernel's name for it, checked: a name can end in " (deleted)" of its own.
    if place.startswith("/") and _key(place) == held.key:
        return place
    raise SandboxError(
        f"{path}, which every sandbox hides, is no longer where it was ({held.place}) and "
        "mcpd cannot find where it is now; sandboxed servers do not start until mcpd "
        "restarts"
    )


def _say(path: str, held: _Held, where: str, other: str | None, alias: str) -> None:
    if where != held.place:
        what = f"{path} is not where it was: it is now at {where}"
    else:
        what = f"{path} names {other} now, not what it named when mcpd first hid it"
    if where != held.place and other is not None:
        what += f", and the path names {other}"
    _notices[path] = f"{what}; mcpd hides both from every server until it restarts"
    if (where, other) in held.said:
        return
    held.said.add((where, other))
    logger.warning(
        "%s: %s (servers started while it was in place: %s)",
        alias,
        _notices[path],
        ", ".join(held.started),
        extra=log_extra(alias, "sandbox_moved", _notices[path]),
    )
