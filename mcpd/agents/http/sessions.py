"""A legacy MCP session over HTTP (``mcp_route``): what it keeps between its requests,
and where and by whom it was opened, the only place and person it is found for."""

from __future__ import annotations

from typing import Final

import msgspec
import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp.serving import AgentSession

from ...servers.shared import AgentKey, Call
from ..askback.askers import AgentRequests
from ..connection.ending import UNANSWERED
from ..entry.identity import AgentIdentity
from ..profiles import Profile
from .exchange import RequestSender
from .stream import SessionNews

# Why a session ended, for the requests it had in flight and the servers waiting on it.
DELETED: Final = "the agent ended its session"
PUSHED_OUT: Final = "the session was ended to make room for a newer one"
REMOVED: Final = "the session was ended with the profile's socket it was opened on"


class OpenedBy(msgspec.Struct, frozen=True):
    """Where and by whom a legacy session was opened: its listener (the TCP endpoint, or
    a socket, by the profile it fixes) and the user holding the connection
    (``holder_of``), and whether that is one of mcpd's servers' processes, as a
    stateless client is told apart (``StatelessAgent``)."""

    endpoint: bool
    fixed: str | None
    uid: int | None
    server: str | None
    unverified: bool

    @classmethod
    def of(cls, caller: RequestSender) -> OpenedBy:
        peer = caller.peer
        return cls(
            endpoint=caller.tcp is not None,
            fixed=caller.fixed,
            uid=holder_of(caller.who()),
            server=None if peer is None else peer.server,
            unverified=peer is not None and peer.unverified,
        )


class LegacySession(AgentKey):
    def __init__(
        self,
        session: AgentSession,
        profile: Profile,
        identity: AgentIdentity,
        opened_by: OpenedBy,
    ) -> None:
        self.session = session
        self.profile = profile  # the one chosen at initialize
        # Whose it is: its id (what is approved for it is kept under) and the user
        # its place counts against. Each request is the process of its own connection
        # (``AgentIdentity.in_session``).
        self.identity = identity
        self.opened_by = opened_by  # the only one it is found for
        self.requests: dict[rpc.Id, trio.CancelScope] = {}
        self.asks = AgentRequests()
        self.news = SessionNews(session, profile)  # read by its GET stream
        self.ended: str | None = None  # why it ended, once it has

    def close(self, why: str) -> None:
        self.ended = why
        self.news.close()
        self.asks.close(why)
        for scope in self.requests.values():
            scope.cancel()

    def cut_short(self, rid: rpc.Id, call: Call | None) -> bytes | None:
        """The answer to its request ``rid`` (a tools/call: its ``call``) that was in
        flight when the session ended (None: it has not), saying whether a call ran."""
        if self.ended is None:
            return None
        if call is None:
            what = UNANSWERED
        elif call.state == "new":
            what = "this call was not sent to its tool server, so it did not run"
        else:
            what = (
                "this call was ended before its tool server answered; it may have reached "
                "the server, so whether it ran is not known"
            )
        return rpc.encode_error(rid, -32000, f"{self.ended}: {what}")


def holder_of(identity: AgentIdentity) -> int | None:
    """Whose a session is, for sharing the places out: its user, the socket's peer's or
    the one holding its TCP connection to the endpoint (None: a client on another
    machine, whose users all hold the one token)."""
    if identity.peer is not None:
        return identity.peer.uid
    return None if identity.holder is None else identity.holder.uid
