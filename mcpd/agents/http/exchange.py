"""One HTTP request as an agent, and who sent it.

``Answerer.dispatch`` answers agents; ``Exchange`` lets it answer one HTTP request as
it answers a connection's, whatever it sends before its answer going into the response
(which then becomes an event stream). ``RequestSender`` is what the HTTP connection it
came on decides: the peer, the profile a profile's socket fixes, the checks of the TCP
endpoint, and who holds its other end (``holders``); ``StatelessAgent``, who a client
without a session is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import h11
import msgspec
import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp.serving import AgentSession

from ...policy.deciders.kin import AgentKin, Decider, unknown_kin
from ...servers.shared import AgentKey, Outcome, ProgressSink
from ..agent import Agent, AgentCall, Audience
from ..askback.askers import AgentRequests, DirectAsker
from ..connection.ending import stopped_answer
from ..entry.holders import HolderLookup, TcpKin
from ..entry.identity import AgentIdentity
from ..entry.peers import Peer
from ..entry.sockets import Leave
from ..profiles import Profile
from .wire import WireResponse


class Exchange(Agent):
    """One HTTP request as the agent ``Answerer.dispatch`` answers.

    What a handler sends before its answer (progress, a subscription's
    acknowledgement) goes through ``outbox`` into the response, which then becomes an
    event stream. Its tools/call is answered in the request's own task
    (``Answerer.dispatch``), so no outcome comes to it to write, and none of its
    calls is handed to a task of its own.
    """

    spoke_mcp = True  # it came to /mcp

    def __init__(
        self,
        session: AgentSession,
        caller: RequestSender,
        profile: Profile,
        owner: AgentKey,
        identity: AgentIdentity,
        asks: AgentRequests | None = None,
        news: Audience | None = None,
    ) -> None:
        """``owner``: who the agent is (its session, or for a stateless client the
        one object of its ``StatelessAgent``); ``identity``: who it is for the policy
        and the audit log (the HTTP connection it came on, in a session under the
        session's id); ``asks``: where a legacy server's requests to it are matched
        with its answers (its session's); ``news``: the session's stream of what
        answers no request (None: stateless)."""
        self.session = session
        self.peer = caller.peer
        self.caller = caller
        self.profile = profile
        self.fixed_profile = caller.fixed
        self.subscriptions: set[rpc.Id] = set()
        self.contexts = {}
        self.seen_version = profile.version
        self.calls_in_tasks = {}
        self.dropped = 0
        self.owner = owner
        self.listen_owner = AgentKey()
        self.identity = identity
        self.asks = asks or AgentRequests()
        self.refusing_asker = DirectAsker(owner, None, self.asks, self.offer)
        self.progress: ProgressSink = self.send_progress
        self.news = news
        self.outbox, self._inbox = trio.open_memory_channel[bytes](256)

    def finish(self, call: AgentCall, outcome: Outcome) -> None:
        """Its call's outcome goes to the request's task that awaits it, not here."""

    def in_task(self, call: AgentCall, answer: Callable[[], Awaitable[bytes]]) -> None:
        """Its call is in the request's own task already."""

    async def kin(self) -> AgentKin:
        return await self.caller.kin()

    def news_sender(self) -> Callable[[bytes], None]:
        # This response ends with its answer; later news goes to the session's stream.
        return self.send_nowait if self.news is None else self.news.send_nowait

    async def send(self, data: bytes, rid: rpc.Id | None = None) -> None:
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            await self.outbox.send(data)

    def offer(self, data: bytes, rid: rpc.Id | None = None) -> bool:
        try:
            self.outbox.send_nowait(data)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            self.dropped += 1
            return False
        return True

    async def drain(self) -> None:
        await trio.lowlevel.checkpoint()

    def stopping(self) -> None:
        """Its request is answered as mcpd stops by ``stopping``, which knows
        whether the answer is written yet."""

    def stopped_answer(self, rid: rpc.Id) -> bytes:
        """The answer to its request ``rid``, cut short as mcpd stops."""
        modern = self.session.legacy_version is None
        return stopped_answer(rid, self.calls_in_tasks.get(rid), modern)

    async def pump(self, response: WireResponse, done: trio.Event) -> None:
        try:
            async with self._inbox:
                async for data in self._inbox:
                    await response.event(data)
        finally:
            done.set()


class StatelessAgent(msgspec.Struct, frozen=True):
    """Who a stateless (2026-07-28) client is, to what it holds in mcpd: its tasks, its
    calls waiting for an answer, its allowance for matching URIs. It has no connection or
    session to be (it may send each request on a new connection), so it is everything
    that decides what its requests may reach: its user, where it came in (the TCP
    endpoint, or the socket, the profile's own one fixing the profile), the profile it
    asked for, and which server's process it is, if any."""

    uid: int | None  # None: the endpoint's clients, who hold one token
    endpoint: bool
    fixed: str | None
    profile: str
    server: str | None
    # From another PID namespace: nothing tells whose process it is.
    unverified: bool


class RequestSender(msgspec.Struct, frozen=True):
    """Who sends the requests of one HTTP connection, and what its socket decides."""

    peer: Peer | None
    fixed: str | None = None  # the profile a profile's own socket serves
    guard: Callable[[h11.Request], None] | None = None  # raises Reject
    # Who a stateless client sending on this connection is (a session has its own).
    identity: AgentIdentity | None = None
    # Who holds its other end (the local user, and whether one of mcpd's servers), for
    # what is bound to a person or kept from servers; None: not known.
    holder: HolderLookup | None = None
    # On the TCP endpoint, who holds its other end, looked for at its first request to
    # /mcp and when someone decides through it.
    tcp: TcpKin | None = None
    # On the TCP endpoint, whether the connection holds a place of the status page's
    # rather than the agents' (``endpoint_places``); None: elsewhere.
    page_place: bool | None = None
    # On a profile's own socket, what ends the connection once a reload removes the
    # profile (``leave``); None: elsewhere.
    leave: Leave | None = None

    def who(self) -> AgentIdentity:
        return self.identity if self.identity is not None else AgentIdentity(self.peer)

    def stateless_agent(self, profile: Profile) -> StatelessAgent:
        """Who a client sending stateless requests here in the profile ``profile`` is."""
        peer = self.peer
        return StatelessAgent(
            uid=None if peer is None else peer.uid,
            endpoint=self.tcp is not None,
            fixed=self.fixed,
            profile=profile.name,
            server=None if peer is None else peer.server,
            unverified=peer is not None and peer.unverified,
        )

    async def kin(self) -> AgentKin:
        """Who may not decide what the agent on this connection asks (``policy.deciders.kin``)."""
        if self.tcp is None:
            if self.peer is None:
                return unknown_kin("the kernel did not say who connected", None)
            return self.peer.kin
        # The kernel names no process of a TCP peer: those that hold its end of this
        # connection are found in /proc, off the event loop.
        return await self.tcp.kin()

    async def deciders(self) -> tuple[Decider, ...]:
        """Who sends on this connection, as deciders (``policy.deciders.kin``): the peer on a
        socket; on the TCP endpoint, the processes that hold its other end, where
        they are found."""
        if self.tcp is None:
            return () if self.peer is None else (self.peer.decider(),)
        return await self.tcp.deciders()
