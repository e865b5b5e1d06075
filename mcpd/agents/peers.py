"""Who is on the other end of the agent socket, and whether they may use it.

The kernel tells us the connecting process's pid, uid and gid (SO_PEERCRED); nothing
the peer says about itself is taken into account.
"""

from __future__ import annotations

import grp
import os
import pwd
import socket
import struct
from collections.abc import Iterable

import msgspec

_CRED = struct.Struct("3i")
# The peer's supplementary groups as of connect() (Linux >= 4.13); 256 fit in the most
# getsockopt() will return, beyond that _groups_of() reads /proc.
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)
_GROUPS_BUFLEN = 1024


class Peer(msgspec.Struct, frozen=True):
    pid: int
    uid: int
    gid: int
    groups: frozenset[int] | None = None  # None: unknown, look in /proc


def peer_of(sock: socket.socket | object) -> Peer | None:
    getsockopt = getattr(sock, "getsockopt", None)
    if getsockopt is None:
        return None
    try:
        raw = getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
    except OSError:
        return None
    pid, uid, gid = _CRED.unpack(raw)
    groups: frozenset[int] | None = None
    try:
        data = getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, _GROUPS_BUFLEN)
        groups = frozenset(struct.unpack(f"{len(data) // 4}I", data))
    except OSError:
        pass
    return Peer(pid, uid, gid, groups)


def _groups_of(pid: int) -> set[int]:
    """The peer's supplementary groups, from /proc (empty if it already exited, or if
    /proc hides it, as under systemd's ProtectProc=invisible)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Groups:"):
                    return {int(g) for g in line.split()[1:]}
    except (OSError, ValueError):
        pass
    return set()


def resolve_groups(names: Iterable[str]) -> set[int]:
    gids: set[int] = set()
    for name in names:
        if name.isdigit():
            gids.add(int(name))
            continue
        try:
            gids.add(grp.getgrnam(name).gr_gid)
        except KeyError:
            continue
    return gids


def is_allowed(peer: Peer, allow_uids: Iterable[int], allow_gids: set[int]) -> bool:
    if peer.uid in (0, os.getuid()) or peer.uid in set(allow_uids):
        return True
    if not allow_gids:
        return False
    groups = peer.groups if peer.groups is not None else _groups_of(peer.pid)
    return peer.gid in allow_gids or bool(groups & allow_gids)


def is_owner(peer: Peer | None) -> bool:
    """Control methods (reload) are for the daemon's own user and root."""
    return peer is None or peer.uid in (0, os.getuid())


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "no user name"
