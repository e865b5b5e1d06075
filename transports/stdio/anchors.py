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
No trio here.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from typing import Final

from protocol.logfields import log_extra

from .sandbox import SandboxError

logger = logging.getLogger("mcpd.stdio")
_FLAGS: Final = os.O_PATH | os.O_CLOEXEC


class _Held:
    """What a hidden path named when first found, and who was started with it there."""

    def __init__(self, fd: int, st: os.stat_result, place: str) -> None:
        self.fd = fd
        self.key = (st.st_dev, st.st_ino)
        self.place = place  # where it was
        self.started: list[str] = []  # the servers started while it was there
        self.said: set[tuple[str, str | None]] = set()


_held: dict[str, _Held] = {}
_notices: dict[str, str] = {}


def places(path: str, alias: str) -> list[str]:
    """The real paths that hide ``path`` for the server ``alias`` starting now: what
    the path names now and, when that is not it, where what it named is now. Empty
    when neither exists. Raises SandboxError when that cannot be named."""
    real = os.path.realpath(path)
    now = _key(real)
    held = _held.get(path)
    where = _where(held, path) if held is not None else None
    if held is not None and where is None:  # removed: found afresh
        os.close(held.fd)
        del _held[path]
        _notices.pop(path, None)
        held = None
    if held is None:
        if now is not None:
            _hold(path, real, alias)
        return [real] if now is not None else []
    assert where is not None
    other = real if now is not None and now != held.key else None
    if where == held.place and other is None:
        if alias not in held.started:
            held.started.append(alias)
        _notices.pop(path, None)
        return [real]
    _say(path, held, where, other, alias)
    return [where] if other is None else [where, other]


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
    """What ``mcpd status`` says of hidden paths that are not where they were."""
    return sorted(_notices.values())


def release() -> None:
    """Forget every hidden path (for a test that starts afresh)."""
    for held in _held.values():
        os.close(held.fd)
    _held.clear()
    _notices.clear()


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
