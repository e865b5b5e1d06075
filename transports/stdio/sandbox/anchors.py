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
afresh. So is a file whose hidden name was removed while it keeps another (a hard
link), which the kernel cannot name: only someone who could read it already can do
that (the user, a server without a sandbox, or one started before mcpd first hid it),
and any of them could as well have copied it, so refusing every sandboxed server
would protect nothing and hand any of those servers an outage of the others; mcpd
says so instead, until it restarts.

A hidden path may be a pattern, with ``*`` in its last part only (``/tmp/ssh-*``, where
key agents make their sockets): it stands for what matches it as each server starts,
is owned by mcpd's user and is no symbolic link (agents make directories and sockets
there; a link would choose what is hidden), and for what it matched before (followed
as above), since such places come and go while mcpd runs.

A hidden path is followed as ``hidden_links`` says: through links of mcpd's user's
or root's only, and to no place servers need. A name another user holds is said once
in the journal (``MCPD_EVENT=sandbox_foreign``) and in ``mcpd status`` for as long as
it is there; a link that leads where servers need, likewise (``sandbox_link``). A
link that appears at a hidden name after mcpd first looked there is followed as any
other (the user may have made it), and said until mcpd restarts.
No trio here.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import pwd
import stat
from collections.abc import Sequence
from typing import Final

from protocol.shown.logfields import log_extra

from .hidden_links import Followed, Needed, Theirs, follow, needed, reaching, spared
from .plan import SandboxError

logger = logging.getLogger("mcpd.stdio")
_FLAGS: Final = os.O_PATH | os.O_CLOEXEC
_APPEARED: Final = (
    "when mcpd first looked: mcpd hides that from the servers started from now on, until "
    "it restarts (a server may have made the link, to keep the others from it: remove "
    "the link, and restart mcpd, unless you made it)"
)


class _Held:
    """What a hidden path named when first found, and who was started with it there."""

    def __init__(self, fd: int, st: os.stat_result, place: str, link: str | None) -> None:
        self.fd = fd
        self.key = (st.st_dev, st.st_ino)
        self.place = place  # where it was
        self.link = link  # the link that led there, if one did
        self.started: list[str] = []  # the servers started while it was there
        self.said: set[tuple[str, str | None]] = set()


_held: dict[str, _Held] = {}
# The hidden paths looked at since mcpd started: whether a link led on from each then.
_looked: dict[str, bool] = {}
_notices: dict[str, str] = {}
_theirs: dict[str, str] = {}  # what is said of a hidden path another user holds
# Of a hidden path and a place servers need, which a link on its way leads to.
_links: dict[tuple[str, str], str] = {}
_since: dict[str, str] = {}  # of one that became a link, or lost its file, while mcpd ran


def places(path: str, alias: str, needs: Sequence[Needed] = ()) -> list[str]:
    """The real paths that hide ``path`` for the server ``alias`` starting now: what
    the path names now (unless another user holds it) and, when that is not it, where
    what it named is now; of those a link chose, none that is or holds a place it
    ``needs`` or every server needs. Empty when none is left. Raises SandboxError when
    what it named cannot be looked for, or when a place it needs lies in one of those
    through a link on its own way (which the server may have made to be shown it)."""
    found = follow(path)
    _say_whose(path, found if isinstance(found, Theirs) else None, alias)
    real = found if isinstance(found, Followed) and _key(found.path) is not None else None
    chosen = _chosen(path, real, alias)
    left = [f for f in chosen if f.link is not None and needed(f.path, needs) is not None]
    linked = {f.path for f in chosen if f.link is not None}
    for gone in [k for k in _links if k[0] == path and k[1] not in linked]:
        del _links[gone]
    for f in left:
        _say_needed(path, f, needs, alias)
    for f in chosen:
        need = reaching(f.path, needs) if f.link is not None and f not in left else None
        if need is not None:
            raise SandboxError(_reached(path, f, need))
    return list(dict.fromkeys(f.path for f in chosen if f not in left))


def _chosen(path: str, real: Followed | None, alias: str) -> list[Followed]:
    """What hides ``path``, each with the link that chose it: what it names now
    (``real``, when that exists) and where what it named when first found is now."""
    linked_then = _looked.setdefault(path, real is not None and real.link is not None)
    appeared = not linked_then and real is not None and real.link is not None
    held = _held.get(path)
    where = _where(held, path, alias) if held is not None else None
    if held is not None and where is None:  # removed, or not to be found: afresh
        os.close(held.fd)
        del _held[path]
        _notices.pop(path, None)
        held = None
    if held is None:
        if real is None:
            return []
        if not spared(real):  # else looked at afresh at each start, holding nothing
            _hold(path, real, alias)
            if appeared:
                _say_since(path, f"{_lead(path, real)}, which it was not {_APPEARED}", alias)
        return [real]
    assert where is not None
    then = Followed(where, held.link)
    other = real if real is not None and _key(real.path) != held.key else None
    news = other if other is not None and not spared(other) else None
    if where == held.place and news is None:
        if alias not in held.started:
            held.started.append(alias)
        _notices.pop(path, None)
        if other is None:
            return [then if real is None else real]
        return [then, other]
    _say(path, held, where, news.path if news is not None else None, alias)
    return [then] if other is None else [then, other]


def followed(path: str) -> str | None:
    """Where ``path`` leads, as ``places`` follows it, holding and saying nothing; None
    when another user holds a name on the way, or a link leads to a place every
    server needs (nothing is hidden there)."""
    found = follow(path)
    return found.path if isinstance(found, Followed) and not spared(found) else None


def matching(pattern: str) -> list[str]:
    """The paths a hidden ``pattern`` stands for now: those that match it, are owned
    by mcpd's user and are no symbolic link, and those it matched before; ``pattern``
    itself when it has no ``*``."""
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
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return st.st_uid == os.geteuid() and not stat.S_ISLNK(st.st_mode)


def notices() -> list[str]:
    """What ``mcpd status`` says of hidden paths that are not where they were, of
    those another user holds, and of those a link leads elsewhere."""
    return sorted([*_notices.values(), *_theirs.values(), *_links.values(), *_since.values()])


def forget_all() -> None:
    """Forget every hidden path, and close what was held to follow them: when the
    daemon's servers have all stopped, and where a test starts afresh."""
    for held in _held.values():
        os.close(held.fd)
    for kept in (_held, _notices, _theirs, _links, _since):
        kept.clear()
    _looked.clear()


def _say_whose(path: str, theirs: Theirs | None, alias: str) -> None:
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


def _hold(path: str, real: Followed, alias: str) -> None:
    try:
        fd = os.open(real.path, _FLAGS)
    except OSError:
        return  # gone since: nothing to hide, nothing to follow
    held = _Held(fd, os.fstat(fd), real.path, real.link)
    held.started.append(alias)
    _held[path] = held


def _where(held: _Held, path: str, alias: str) -> str | None:
    """Where what ``path`` named is now; None when it was removed, or when only another
    name is left for it, which the kernel does not give (said)."""
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
    _say_since(
        path,
        f"{path} was removed while the file it named keeps another name, which mcpd cannot "
        f"find (servers started while it was in place: {', '.join(held.started)}); only "
        "you, a server without a sandbox or one started before mcpd first hid it (which "
        "could read it already) could do that: it is hidden no longer, and sandboxed "
        "servers start as before",
        alias,
    )
    return None


def _lead(path: str, found: Followed) -> str:
    if found.link == os.path.normpath(path):
        return f"{path} is a symbolic link to {found.path}"
    return f"{path} lies through the symbolic link {found.link}, to {found.path}"


def _say_needed(path: str, left: Followed, needs: Sequence[Needed], alias: str) -> None:
    """Say, once, that a link on the way to ``path`` leads where servers need (``left``
    out of what is hidden), as long as it does."""
    said = f"{_lead(path, left)}, which {needed(left.path, needs)}: no link makes mcpd "
    said += "hide that (remove the link unless you made it)"
    if _links.get((path, left.path)) == said:
        return
    _links[path, left.path] = said
    logger.warning("%s: %s", alias, said, extra=log_extra(alias, "sandbox_link", said))


def _reached(path: str, hidden: Followed, need: Needed) -> str:
    said = f"{_lead(path, hidden)}, which mcpd hides; {need.what} ({need.given}) leads into "
    said += f"it, to {need.path}, through a symbolic link, which a server may have made: "
    said += "mcpd starts no server where it would show it what is hidden (remove that link "
    return said + "unless you made it, or name the place by its own path in the config)"


def _say_since(path: str, said: str, alias: str) -> None:
    """Say, once, what became of ``path`` while mcpd ran, until it restarts."""
    if _since.get(path) == said:
        return
    _since[path] = said
    logger.warning("%s: %s", alias, said, extra=log_extra(alias, "sandbox_moved", said))


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
