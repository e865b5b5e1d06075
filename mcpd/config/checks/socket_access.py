"""Whether those ``allow_uids`` and ``allow_groups`` name can reach a socket mcpd binds.

mcpd's own check of a peer comes second: first the kernel asks whether the peer may
open the socket file (write permission on it) and search every directory above it. A
file has one group, and a socket mcpd binds would get its user's own: so mcpd gives it
the first group of ``allow_groups`` it may give a file (root any, another user one it
is in), which ``"0660"`` then lets in. Whatever the mode, groups and directories still
keep out, mcpd cannot widen on its own (a directory is not its to open, and a wider
mode is the user's to choose): it is warned of, naming who, the path and its mode, and
what to change. Judged as the user databases say now: a warning, never a refusal.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from ...local.ownership.owners import group_name
from .endpoints import group_id

_OPEN_FOR_ALL = (
    'set socket_mode = "0666" (mcpd still lets in only its own user, root and those '
    "allow_uids and allow_groups name)"
)


def gid_of(name: str) -> int | None:
    """The group id an ``allow_groups`` entry names (None: no such group)."""
    gid = group_id(name)
    if gid is not None:
        return gid
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def may_give(gid: int) -> bool:
    """Whether mcpd's process may make ``gid`` the group of a file it owns."""
    return os.geteuid() == 0 or gid == os.getegid() or gid in os.getgroups()


def socket_group(allow_groups: Iterable[str]) -> int | None:
    """The group mcpd gives a socket whose ``allow_groups`` these are: the first of
    them it may give; None when there is none (the socket keeps its user's group)."""
    for name in allow_groups:
        gid = gid_of(name)
        if gid is not None and may_give(gid):
            return gid
    return None


class _Who(NamedTuple):
    """Someone who is to reach the socket: a user (``uid``), or any member of a group
    (``uid`` None, ``gids`` that group)."""

    said: str
    uid: int | None
    gids: frozenset[int]


def _groups_of(uid: int) -> tuple[str, frozenset[int]]:
    try:
        user = pwd.getpwuid(uid)
    except KeyError:
        return f"uid {uid}", frozenset()
    extra = (g.gr_gid for g in grp.getgrall() if user.pw_name in g.gr_mem)
    return f"uid {uid} ({user.pw_name})", frozenset({user.pw_gid, *extra})


def _allowed(allow_uids: Iterable[int], allow_groups: Iterable[str]) -> Iterator[_Who]:
    for name in allow_groups:
        gid = gid_of(name)
        if gid is not None:
            yield _Who(f"the members of {group_name(gid)}", None, frozenset({gid}))
    for uid in dict.fromkeys(allow_uids):
        if uid not in (0, os.geteuid()):  # root passes the checks; the owner is let in
            said, gids = _groups_of(uid)
            yield _Who(said, uid, gids)


def _bits(who: _Who, st_uid: int, st_gid: int, mode: int, want: int) -> bool:
    """Whether ``mode`` grants ``who`` the permission ``want`` (as its owner's bits)."""
    if who.uid == st_uid:
        return bool(mode & want)
    if st_gid in who.gids:
        return bool(mode & (want >> 3))
    return bool(mode & (want >> 6))


def access_warnings(
    key: str, path: str, mode: int, allow_uids: list[int], allow_groups: list[str]
) -> list[str]:
    """What keeps out those ``key``'s ``allow_uids`` and ``allow_groups`` (``key``:
    ``daemon`` or ``profiles.NAME``) from a socket mcpd binds at ``path`` with ``mode``."""
    who = list(_allowed(allow_uids, allow_groups))
    if not who:
        return []
    given = socket_group(allow_groups)
    group = os.getegid() if given is None else given
    out = []
    shut = [w for w in who if not _bits(w, os.geteuid(), group, mode, 0o200)]
    if shut:
        out.append(_file_warning(key, shut, mode, group, given) + _activated(key))
    out += _directory_warnings(key, path, [w for w in who if w not in shut])
    return out


def _file_warning(key: str, shut: list[_Who], mode: int, group: int, given: int | None) -> str:
    names = ", ".join(w.said for w in shut)
    said = (
        f"{key}: {names} cannot open the socket file, whose mode {mode:04o} gives them "
        f"no write permission (its group is {group_name(group)}), which connecting takes; "
    )
    members = [w for w in shut if w.uid is None]
    if given is None and members:
        user = _owner(os.geteuid())
        return (
            f"{said}a file can be given only a group its owner is in, and mcpd's user "
            f"({user}) is in none of {key}.allow_groups: add it to one (usermod -aG GROUP "
            f'{user}, then restart mcpd) and set socket_mode = "0660", or {_OPEN_FOR_ALL}'
        )
    if all(given in w.gids for w in members) and len(members) == len(shut):
        return f'{said}set socket_mode = "0660" to let the group in'
    if given is not None and any(given not in w.gids for w in members):
        # One group per file: the other groups' members are let in by the bits for others.
        said += f"a socket has one group, and mcpd gives it {group_name(given)}; "
    return f"{said}{_OPEN_FOR_ALL}"


def _activated(key: str) -> str:
    # check-config cannot tell whether systemd will pass the socket instead.
    return (
        " (under mcpd.socket, its SocketMode= and SocketGroup= decide)" if key == "daemon" else ""
    )


def _directory_warnings(key: str, path: str, who: list[_Who]) -> list[str]:
    """The first directory above ``path`` each of ``who`` cannot search, said once a
    directory. One not made yet is left out: mcpd makes it 0755 when the socket's mode
    lets others in, and when it does not, the file keeps them out already."""
    out: dict[str, list[str]] = {}
    checked = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    parts = checked.split("/")[1:]
    for w in who:
        at = "/"
        for part in ["", *parts]:
            at = os.path.join(at, part) if part else "/"
            try:
                st = os.stat(at)
            except OSError:
                break  # made when mcpd binds
            if not _bits(w, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), 0o100):
                out.setdefault(at, []).append(w.said)
                break
    warnings = []
    for at, names in out.items():
        st = os.stat(at)
        owner = _owner(st.st_uid)
        warnings.append(
            f"{key}: {', '.join(names)} cannot reach the socket {path}: the directory {at} "
            f"(mode {stat.S_IMODE(st.st_mode):04o}, owner {owner}, group "
            f"{group_name(st.st_gid)}) does not let them search it; open it to them "
            f"(chmod o+x {at}, or g+x with a group of theirs) or set {key}.socket to a path "
            "in a directory they can reach"
        )
    return warnings


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
