"""Whose files and processes mcpd trusts: its own user, root, and the mcpd service's user.

Anything another user owns (a directory mcpd writes secrets into, a token or login it
reads back, a process answering on its socket) could have been put there or changed by
that user, so it is refused with the owner named.
"""

from __future__ import annotations

import contextlib
import functools
import grp
import os
import pwd
import stat
from collections import deque
from typing import Final

# Symbolic links followed on the way to a file, at most (the kernel's own bound).
_MAX_LINKS: Final = 40

# The system unit's RuntimeDirectory=: systemd makes it for the unit's User=.
SERVICE_DIR = "/run/mcpd"
# The unit's User=, as systemd-sysusers makes it (systemd/mcpd.sysusers).
SERVICE_USER = "mcpd"


def service_uids() -> frozenset[int]:
    """The mcpd service's user: the owner of ``SERVICE_DIR``, which systemd gives to the
    unit's User=, and the system user named ``SERVICE_USER``. Only root can make a
    directory in a /run that nobody else may write, or a user, so root chose both."""
    found: set[int] = set()
    try:
        parent = os.stat(os.path.dirname(SERVICE_DIR))
        st = os.stat(SERVICE_DIR)
    except OSError:
        pass
    else:
        if parent.st_uid == 0 and not parent.st_mode & 0o022 and stat.S_ISDIR(st.st_mode):
            found.add(st.st_uid)
    with contextlib.suppress(KeyError):
        found.add(pwd.getpwnam(SERVICE_USER).pw_uid)
    return frozenset(found)


def trusted_owners() -> frozenset[int]:
    """Who may own what mcpd trusts: this process's user, root, the service's user."""
    return frozenset({os.geteuid(), 0}) | service_uids()


@functools.lru_cache(maxsize=256)
def user_name(uid: int) -> str:
    # Cached: a record of every call names its agent's user, and a lookup may read
    # /etc/passwd or ask a directory service.
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "no user name"


def trusted_names() -> str:
    """``trusted_owners()`` in words, for a refusal."""
    mine = os.geteuid()
    names = ["root"] if mine == 0 else [f"you (uid {mine})", "root"]
    names.append("the mcpd service user")
    return ", ".join(names[:-1]) + " or " + names[-1]


def not_trusted(what: str, uid: int) -> str:
    """Why ``what``, owned by ``uid``, is not trusted."""
    return f"{what} belongs to uid {uid} ({user_name(uid)}), not to {trusted_names()}"


def other_writers(st: os.stat_result) -> str | None:
    """Who besides the owner of a file or directory (and root) may write to it, if
    anyone."""
    if st.st_mode & stat.S_IWOTH:
        return "every user"
    if st.st_mode & stat.S_IWGRP and not _private_group(st.st_uid, st.st_gid):
        try:
            return f"the group {grp.getgrgid(st.st_gid).gr_name}"
        except KeyError:
            return f"the group {st.st_gid}"
    return None


def _private_group(uid: int, gid: int) -> bool:
    """Whether ``gid`` is the owner's own group (named after the user, no other member),
    which many distributions give each user, with a umask that lets it write."""
    try:
        user = pwd.getpwuid(uid)
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return (
        user.pw_gid == gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}
    )


def untrusted_file(path: str, st: os.stat_result) -> str | None:
    """Why what the file at ``path`` says may be another user's choice, or None: the
    file (``st``, its status as it was opened) must be a trusted owner's and writable by
    no one else, and so must every directory and symbolic link on the way to it, but
    that a directory others may write to is fine when it is sticky (as ``/tmp`` is:
    there only an entry's owner may replace it)."""
    trusted = trusted_owners()
    if st.st_uid not in trusted:
        return f"{not_trusted(path, st.st_uid)}, who decides what it says"
    who = other_writers(st)
    if who is not None:
        mode = stat.S_IMODE(st.st_mode)
        return f"{path} can be written by {who} (mode {mode:04o}); run chmod go-w {path}"
    return _untrusted_way(path, st, trusted)


def _untrusted_way(path: str, st: os.stat_result, trusted: frozenset[int]) -> str | None:
    """Why the directories and links on the way to ``path`` let another user put a file
    of theirs there, or None; also when what is there now is not the file opened."""
    todo = deque((path if path.startswith("/") else os.path.join(os.getcwd(), path)).split("/"))
    at, links = "/", 0
    while todo:
        name = todo.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            at = os.path.dirname(at)  # each directory is checked on the way down
            continue
        problem = _untrusted_directory(at, trusted)
        if problem is not None:
            return problem
        step = os.path.join(at, name)
        try:
            entry = os.lstat(step)
        except OSError as exc:
            return f"cannot look at {step} on the way to {path}: {exc.strerror}"
        if stat.S_ISLNK(entry.st_mode):
            if entry.st_uid not in trusted:
                owner = not_trusted(step, entry.st_uid)
                return f"the symbolic link {owner}, who chose where it points"
            links += 1
            if links > _MAX_LINKS:
                return f"{path} goes through too many symbolic links"
            target = os.readlink(step)
            if target.startswith("/"):
                at = "/"
            todo.extendleft(reversed(target.split("/")))
            continue
        if any(n not in ("", ".") for n in todo):
            at = step
            continue
        if (entry.st_dev, entry.st_ino) != (st.st_dev, st.st_ino):
            return f"{path} was replaced while mcpd read it"
    return None


def _untrusted_directory(directory: str, trusted: frozenset[int]) -> str | None:
    try:
        st = os.stat(directory)
    except OSError as exc:
        return f"cannot look at {directory}: {exc.strerror}"
    if st.st_uid not in trusted:
        owner = not_trusted(directory, st.st_uid)
        return f"the directory {owner}, who could put another file in its place"
    who = other_writers(st)
    if who is not None and not st.st_mode & stat.S_ISVTX:
        return (
            f"the directory {directory} can be written by {who}, who could put another "
            f"file in its place; run chmod go-w {directory}"
        )
    return None
