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

import errno
import grp
import os
import select
import socket
import struct
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

import msgspec

from ...config.checks.endpoints import group_id
from ...local.ownership.owners import trusted_owners, user_name
from ...policy.deciders.kin import AgentKin, Decider, Process, parent_of

if TYPE_CHECKING:
    import trio

if TYPE_CHECKING:
    import trio  # the command line reads its peer without loading trio

_CRED = struct.Struct("3i")
# The peer's supplementary groups as of connect() (Linux >= 4.13); 256 fit in the most
# getsockopt() will return, beyond that _groups_of() reads /proc.
# The stdlib names the option only where its build knew it: the number is Linux's.
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)
_GROUPS_BUFLEN = 1024


class Peer(msgspec.Struct, frozen=True):
    pid: int
    uid: int
    gid: int
    groups: frozenset[int] | None = None  # None: unknown, look in /proc
    # The server whose process (or its descendant) this is: never the owner.
    server: str | None = None
    # Read from /proc when it connected (``policy.deciders.kin``): the process and those it
    # descends from, and its session, as a decider; and as an agent, who may not decide
    # its calls.
    lineage: tuple[Process, ...] = ()
    session: int | None = None
    lineage_cut: bool = False  # read to its limit, not to init
    lineage_uids: frozenset[int] = frozenset()
    lineage_sessions: frozenset[int] = frozenset()
    kin: AgentKin = AgentKin()
    # Its pid is not one of this PID namespace's (0): nothing can be known of it from
    # /proc, so it is never taken for the owner nor decides a call.
    unverified: bool = False

    def decider(self) -> Decider:
        return Decider(
            self.lineage,
            self.session,
            self.uid,
            cut=self.lineage_cut,
            uids=self.lineage_uids,
            sessions=self.lineage_sessions,
        )


# How far up the parent chain a peer is followed, and how much of its environment read.
_MAX_ANCESTORS: Final = 256
_MAX_ENVIRON: Final = 1 << 20


def _mark_of(pid: int, mark: str) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read(_MAX_ENVIRON)
    except OSError:
        return None
    prefix = mark.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode("ascii", "replace")
    return None


def server_of(
    pid: int, processes: Mapping[int, str], marks: Mapping[str, str], mark: str
) -> str | None:
    """The server that process ``pid`` belongs to: one of ``processes`` (pid -> alias)
    is it or an ancestor of it, or its environment carries a server's start mark (a
    descendant that left its server's process tree). None for any other process."""
    seen = 0
    current: int | None = pid
    while current is not None and current > 1 and seen < _MAX_ANCESTORS:
        if current in processes:
            return processes[current]
        current = parent_of(current)
        seen += 1
    token = _mark_of(pid, mark)
    return marks.get(token) if token is not None else None


def is_stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (by SIGSTOP, a terminal's Ctrl-Z or a
    debugger): it holds its sockets and answers nothing until it is let go on."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    # The state follows the name, which is in parentheses and may hold anything.
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] in (b"T", b"t")


def peer_of(sock: socket.socket | trio.socket.SocketType) -> Peer | None:
    getsockopt = sock.getsockopt
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


# SO_PEERPIDFD (Linux 6.5): a pidfd of the very process that connected, whose place no
# later process can take, as one can take its pid once it is gone.
_SO_PEERPIDFD: Final = 77


class PeerWatch:
    """Whether the process that connected is still there. What /proc says of a pid is
    of that process only while it runs: a process can connect, hand the socket to its
    parent and be gone, and the pid then names nobody (or, later, someone else). So
    what is read of a peer by its pid counts only if the peer is still there after."""

    def __init__(self, sock: trio.socket.SocketType, pid: int) -> None:
        self._pid = pid
        self._fd: int | None = None
        self._gone = False
        try:
            self._fd = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD)
        except OSError as exc:
            # A kernel that has no such option cannot say; any other refusal is for a
            # peer that has already exited and been reaped.
            self._gone = exc.errno not in (errno.ENOPROTOOPT, errno.EOPNOTSUPP)

    def still_there(self) -> bool:
        if self._gone:
            return False
        if self._fd is not None:
            poller = select.poll()
            poller.register(self._fd, select.POLLIN)  # readable once it has exited
            return not poller.poll(0)
        try:
            os.kill(self._pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # another user's process: there
        return True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


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
        gid = group_id(name)
        if gid is not None:
            gids.add(gid)
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
    """Control methods (reload) are for the daemon's own user and root, and never for
    one of its servers' processes, whatever its uid."""
    if peer is not None and (peer.server is not None or peer.unverified):
        return False
    return peer is None or owners_uid(peer.uid)


def owners_uid(uid: int | None) -> bool:
    """Whether ``uid`` is the daemon's own user's or root's."""
    return uid is not None and uid in (0, os.getuid())


def untrusted_daemon(sock: socket.socket | trio.socket.SocketType, path: str) -> str | None:
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
