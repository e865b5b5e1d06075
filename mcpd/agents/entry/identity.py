"""Who one agent connection is, for the policy and the audit log: the kernel's word on
its process (SO_PEERCRED; on the TCP endpoint, the user it names as holding the other
end, and the process of it mcpd found there, ``holders``), the program it runs, and an
id of mcpd's own for the connection (or HTTP session), which remembered approvals are
kept under.

The program's name is read from /proc once, at the connection's first call (again only
when the process found holding a TCP connection changes); the profile and era come with
each call, since an agent may change profile (``mcpd/useProfile``) and a connection may
carry requests of either era.
"""

from __future__ import annotations

import secrets

import msgspec

from ...policy.agent import AgentInfo, exe_of
from ...servers.shared import Whose
from .peers import Peer, is_owner, owners_uid


class Holder(msgspec.Struct, frozen=True):
    """Who holds the other end of a connection: its local user, and the server of
    mcpd's whose process (``pid``) holds it, where one does (a server without a pid:
    mcpd's relay holds it for the server); of no server, a process of the user that
    holds it, where one was looked for and found."""

    uid: int
    server: str | None = None
    pid: int | None = None


def new_connection_id() -> str:
    return secrets.token_hex(4)


class _Program:
    """The name of the program a connection's process runs, as /proc gave it for that
    process (None: it did not say)."""

    __slots__ = ("exe", "pid")

    def __init__(self) -> None:
        self.pid: int | None = None
        self.exe: str | None = None

    def of(self, pid: int) -> str | None:
        if pid != self.pid:
            self.pid, self.exe = pid, exe_of(pid)
        return self.exe


class AgentIdentity:
    __slots__ = ("_legacy", "_modern", "_program", "connection", "holder", "peer")

    def __init__(
        self, peer: Peer | None, holder: Holder | None = None, connection: str | None = None
    ) -> None:
        """``holder``: on the TCP endpoint (no ``peer``), who holds the connection's
        other end; set again as more is found, before its first call. ``connection``:
        the id approvals are kept under (None: one of its own)."""
        self.peer = peer
        self.holder = holder
        self.connection = new_connection_id() if connection is None else connection
        # The agent as its calls of each era are recorded, in the profile of the last.
        self._legacy: AgentInfo | None = None
        self._modern: AgentInfo | None = None
        self._program = _Program()

    def new_session(self) -> AgentIdentity:
        """Who a session opened on this connection is: its peer or holder (the user its
        place is counted against), with an id of its own."""
        return AgentIdentity(self.peer, self.holder)

    def in_session(self, session: AgentIdentity) -> AgentIdentity:
        """Who one request sent on this connection in ``session`` is. The process is
        this connection's, the one that sent it, whatever process opened the session:
        its record and journal line, its rate, the share of what waits for its
        server, and the "who asked" of an approval are that process's, as they are
        for a line connection's calls. The id is the session's: an approval
        remembered "for the connection" was given for the session, and ends with it,
        whichever of its user's connections sends in it (none of another user's finds
        it)."""
        sent = AgentIdentity(self.peer, self.holder, session.connection)
        sent._program = self._program  # read once for this connection, not per request
        return sent

    def whose(self) -> Whose:
        """Whose its calls are, as what they keep while they wait for their servers is
        shared out: its peer's user and process, or the holder's on the TCP endpoint;
        mcpd's own user or root as ``peers`` tells them (never a server's process)."""
        peer, holder = self.peer, self.holder
        if peer is not None:
            return Whose(peer.uid, None if peer.pid <= 0 else peer.pid, is_owner(peer))
        if holder is not None:
            return Whose(holder.uid, holder.pid, owners_uid(holder.uid))
        return Whose(None, None, False)

    def reads_as_owner(self) -> bool:
        """Whether it is told what the daemon's own user and root alone are (what a
        server wrote on stderr, its pid and home): its peer is one of them and none of
        mcpd's servers, or, on the TCP endpoint, it holds the token, which reads as
        the daemon's own user (as ``Profiles.scope`` has it)."""
        return is_owner(self.peer)

    def reads_shared_output(self, fixed_profile: str | None) -> bool:
        """Whether it is told what a server writes for every agent it serves (its log
        messages; its stderr, pid and home in status), on a connection held to the
        profile ``fixed_profile`` (None: the daemon's own socket or endpoint). Such
        output is often another agent's calls' arguments, so it is the daemon's own
        user's and root's, and on a profile's own socket not even theirs: there an
        agent reads nothing of another profile's calls."""
        return fixed_profile is None and self.reads_as_owner()

    def info(self, profile: str, modern: bool) -> AgentInfo:
        """The agent as one call of it, in ``profile`` and its era, is recorded."""
        info = self._modern if modern else self._legacy
        if info is None or info.profile != profile:
            info = self._made(profile, modern)
        return info

    def _made(self, profile: str, modern: bool) -> AgentInfo:
        peer, holder = self.peer, self.holder
        uid: int | None = None
        pid: int | None = None
        if peer is not None:
            uid, pid = peer.uid, (None if peer.pid <= 0 else peer.pid)
        elif holder is not None:
            uid, pid = holder.uid, holder.pid
        info = AgentInfo(
            uid=uid,
            pid=pid,
            exe=None if pid is None else self._program.of(pid),
            profile=profile,
            connection=self.connection,
            era="modern" if modern else "legacy",
        )
        if modern:
            self._modern = info
        else:
            self._legacy = info
        return info
