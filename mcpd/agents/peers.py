"""Who is on the other end of the agent socket, and whether they may use it.

The kernel tells us the connecting process's pid, uid and gid (SO_PEERCRED); nothing
the peer says about itself is taken into account.

The same works the other way round: a client (the command line, the bridge) asks who
answers on the socket before it sends a thing, and talks only to a daemon run by its
own user, root, or the mcpd service's user. Anyone who could put a socket where the
client looks (a directory in /tmp made first by another user) would otherwise be
sent every tool call and could answer with tools of their own.
"""

from __future__ import annotations

import grp
import os
import socket
import struct
from collections.abc import Iterable

import msgspec

from ..host.owners import trusted_owners, user_name

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


def untrusted_daemon(sock: socket.socket | object, path: str) -> str | None:
    """Why the process answering on ``path`` (connected as ``sock``) must not be told
    anything, or None when it runs as this user, root or the service's user. The kernel
    gives the credentials of whoever made the listening socket (systemd for
    mcpd.socket)."""
    peer = peer_of(sock)
    if peer is None:
        return f"cannot tell who answers on {path}: refusing to talk to it"
    if peer.uid in trusted_owners():
        return None
    return (
        f"the process answering on {path} (pid {peer.pid}) runs as uid {peer.uid} "
        f"({user_name(peer.uid)}), not you, root or the mcpd service user: refusing to "
        "talk to it"
    )
