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
import struct
from typing import Final

# The system socket's directory. mcpd.socket makes it root's; a unit that makes it its
# RuntimeDirectory= (mcpd binding its own socket) gives it to the unit's User=.
SERVICE_DIR = "/run/mcpd"
# The unit's User=, as systemd-sysusers makes it (systemd/mcpd.sysusers).
SERVICE_USER = "mcpd"


def service_uids() -> frozenset[int]:
    """The mcpd service's user: the owner of ``SERVICE_DIR``, where systemd gives it to
    the unit's User=, and the system user named ``SERVICE_USER``. Only root can make a
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


def other_writers(st: os.stat_result, acl: bytes | None = None) -> str | None:
    """Who besides the owner of a file or directory (and root) may write to it, if
    anyone: by its mode, and by ``acl``, its POSIX access ACL as the kernel keeps it
    (``acl_of``), whose named users and groups the mode's bits do not show."""
    if st.st_mode & stat.S_IWOTH:
        return "every user"
    # Besides its owner and root, mcpd's own user is no other writer: root's directory
    # that mcpd's group may write (install -o root -g mcpd -m 0770) is for mcpd alone.
    own = (st.st_uid, os.geteuid())
    if st.st_mode & stat.S_IWGRP and not _anyones_own(own, st.st_gid):
        return f"the group {group_name(st.st_gid)}"
    if acl is not None:
        for tag, ident in _acl_writers(acl):
            if tag == _ACL_USER and ident not in (*own, 0):
                return f"the user {user_name(ident)} (uid {ident}, by its ACL)"
            if tag == _ACL_GROUP and not _anyones_own(own, ident):
                return f"the group {group_name(ident)} (by its ACL)"
    return None


def _anyones_own(uids: tuple[int, ...], gid: int) -> bool:
    return any(_private_group(uid, gid) for uid in uids)


def acl_of(target: str | int) -> bytes | None:
    """The POSIX access ACL of a path (followed if a link) or an open descriptor, as
    its extended attribute holds it; None where it has none or cannot have one."""
    try:
        return os.getxattr(target, _ACL)
    except OSError:
        return None


_ACL: Final = "system.posix_acl_access"
# The attribute's layout: a version word, then an entry of (tag, permissions, id) each.
_ACL_ENTRY: Final = struct.Struct("<HHI")
_ACL_USER, _ACL_GROUP, _ACL_MASK = 0x02, 0x08, 0x10
_ACL_WRITE: Final = 0x02


def _acl_writers(acl: bytes) -> list[tuple[int, int]]:
    """The named users and groups (tag, id) an ACL lets write, within its mask."""
    if len(acl) < 4 or (len(acl) - 4) % _ACL_ENTRY.size:
        return []
    entries = [_ACL_ENTRY.unpack_from(acl, at) for at in range(4, len(acl), _ACL_ENTRY.size)]
    mask = next((perms for tag, perms, _ in entries if tag == _ACL_MASK), _ACL_WRITE)
    return [
        (tag, ident)
        for tag, perms, ident in entries
        if tag in (_ACL_USER, _ACL_GROUP) and perms & mask & _ACL_WRITE
    ]


def group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _private_group(uid: int, gid: int) -> bool:
    """Whether ``gid`` is the owner's own group (named after the user, no other member,
    the primary group of no other user), which many distributions give each user, with
    a umask that lets it write."""
    try:
        user = pwd.getpwuid(uid)
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    if user.pw_gid != gid or group.gr_name != user.pw_name:
        return False
    if not set(group.gr_mem) <= {user.pw_name}:
        return False
    return not any(other.pw_gid == gid and other.pw_uid != uid for other in pwd.getpwall())
