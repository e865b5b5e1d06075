"""An agent's connection (or HTTP exchange) as the calls it makes and the handlers of
its requests need it: where their outcomes go, where a call that must wait for a person
is awaited, what the agent is (its session, profile, peer, identity) and how it is
written to. ``agent_connection.Connection`` derives from it, and so does an HTTP
request's ``http.exchange.Exchange``; what routes a call (``toolcall``), what answers
the other requests (``answerer``, ``own_methods``, ``extra_methods``) and what
tells agents of changes (``Audience``, which an HTTP session's news is too) know the
agent by this alone.

``AgentCall`` is a tools/call as the agent side keeps it: the servers' ``Call`` it
hands down, and what only this side reads of it (how it was routed, what the policy
decided, its audit record's parts). While the servers have that ``Call`` (from
``sent`` to its outcome, or to ``let_go``), this is its caller, so the outcome comes
back to it without a lookup; only then, so that the two refer to each other no longer
than that, and a call ended is freed at once, with no cycle left for the collector."""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

import msgspec

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import AgentSession, RequestContext

from ..policy.deciders.kin import AgentKin
from ..policy.decision.rules import Decision
from ..registry.tables.shown import Entry
from ..registry.uris.scheme import Sight
from ..servers.shared import AgentKey, Call, Outcome, ProgressSink, SessionMark, Whose
from .askback.askers import AgentRequests, DirectAsker
from .calls.result_bounds import progress_within
from .entry.dial import WAITING
from .entry.identity import AgentIdentity
from .entry.peers import Peer, is_owner
from .profiles import Profile


class OutcomeSink(abc.ABC):
    """Where a call's one outcome goes: its agent, which writes the reply, or a task of
    the agent's request that awaits it (``askback.awaited``)."""

    @abc.abstractmethod
    def finish(self, call: AgentCall, outcome: Outcome) -> None:
        """``call``'s one outcome (never raised into: it is written, or kept)."""


class Audience(abc.ABC):
    """Who hears that what it is shown changed (the broadcasters of ``news``): an agent,
    or a legacy HTTP session's stream of what answers no request."""

    session: AgentSession
    profile: Profile
    seen_version: int  # its profile's version whose changes it has been told
    # The versions of the prompt and resource lists it was last told of (None: it has
    # not begun to hear of their changes).
    seen_offered: tuple[int, int] | None = None
    subscriptions: set[rpc.Id]  # its listens that asked for tool-list changes

    @abc.abstractmethod
    def send_nowait(self, data: bytes, rid: rpc.Id | None = None) -> None:
        """A message for it that answers none of its requests (or an error answering
        ``rid``); one that reads too slowly misses some."""


class Agent(Audience, OutcomeSink):
    """An agent's connection (or HTTP exchange), as its calls and the handlers of its
    requests read it: the connection derives from this, which keeps it out of this
    module's imports. It is no ``AgentKey``: what it leaves at mcpd is kept under objects
    of its own (``owner``, ``listen_owner``)."""

    # The request contexts of the _meta it sends again and again, by those bytes.
    contexts: dict[bytes, RequestContext]
    # What it leaves at mcpd is kept under: on the socket one made with the connection;
    # over HTTP its session, or a stateless client's own (``mcp_route``).
    owner: AgentKey
    # What its listens' resource subscriptions are kept under: on the socket its owner;
    # over HTTP one made with the exchange, as a listen lasts no longer than its request.
    listen_owner: AgentKey
    asks: AgentRequests  # what servers ask this agent through mcpd (a legacy agent)
    # The asker of its calls sent without a task: it declares nothing, so a server's
    # request during one is refused, naming the capability it would need.
    refusing_asker: DirectAsker
    progress: ProgressSink
    identity: AgentIdentity  # who it is, for the policy and the audit log
    peer: Peer | None  # the process on a socket, as the kernel named it (None: none did)
    fixed_profile: str | None  # the profile its socket serves alone (None: any)
    calls_in_tasks: dict[rpc.Id, AgentCall]  # its tools/call answered in tasks of their own
    # The longest line read from it, which ``mcpd/lineLimit`` tells (None: it reads no
    # lines, as an HTTP exchange).
    line_limit: int | None = None
    # Whether it is an agent: it sent an MCP message and is not the command line's (a
    # connection with only mcpd's own commands, as `mcpd status`'s, is none).
    spoke_mcp: bool = False
    # It asked to be told when a call of its waits for a person (``dial.TELL_WAITS``).
    tells_waits: bool = False

    @property
    def label(self) -> str:
        """Which agent this is, for the log (as the kernel says, not the agent)."""
        peer = self.peer
        return "agent (peer unknown)" if peer is None else f"agent (pid {peer.pid}, uid {peer.uid})"

    def may_control(self) -> bool:
        """The daemon's user or root, on a socket (no peer: the HTTP endpoint's token);
        on a profile's socket, of the methods that stay within it alone
        (``own_methods.profile_bound``)."""
        return self.peer is not None and is_owner(self.peer)

    def reads_shared_output(self) -> bool:
        """Whether it is told what a server writes for every agent it serves (its log
        messages, stderr, pid and home): the daemon's own user's and root's, and not
        on a profile's own socket (``AgentIdentity.reads_shared_output``)."""
        return self.identity.reads_shared_output(self.fixed_profile)

    def waits(self, id: str, within: float) -> None:
        """A call of its waits for a person, under ``id``, ``within`` seconds at most."""
        self.send_nowait(rpc.encode_notification(WAITING, {"id": id, "timeout": within}))

    def whose(self) -> Whose:
        """Whose its calls are (``servers.calling.calls.Caller``)."""
        return self.identity.whose()

    def send_progress(self, params: mcp.ProgressParams) -> None:
        """Its calls' progress, as it comes (its ``progress``, unless a task's), each
        report's ``_meta`` held to its bound."""
        held = progress_within(params)
        self.send_nowait(rpc.encode_notification("notifications/progress", held))

    @abc.abstractmethod
    def in_task(self, call: AgentCall, answer: Callable[[], Awaitable[bytes]]) -> None:
        """``call``, started without a task, is answered by ``answer`` in a task of
        its request instead (it waits for a person's decision)."""

    @abc.abstractmethod
    async def kin(self) -> AgentKin:
        """Who may not decide this agent's calls that wait for approval: asked for once
        a call is to wait, and only then."""

    @abc.abstractmethod
    def offer(self, data: bytes, rid: rpc.Id | None = None) -> bool:
        """``send_nowait``, saying whether the message went: False when it was dropped
        (the agent let what waits for it fill up, or is gone)."""

    def send_nowait(self, data: bytes, rid: rpc.Id | None = None) -> None:
        self.offer(data, rid)

    @abc.abstractmethod
    async def send(self, data: bytes, rid: rpc.Id | None = None) -> None:
        """A message for the agent; waits while too much is queued for it."""

    async def send_long(self, rid: rpc.Id, pieces: Iterable[bytes | memoryview]) -> bool:
        """The reply to ``rid``, too long to make whole, written piece by piece as the
        agent reads it; False when it is to go whole instead, as an HTTP response's
        body does (only a connection that reads lines writes one in pieces)."""
        return False

    @abc.abstractmethod
    async def drain(self) -> None:
        """Waits until what is queued for the agent is written."""

    @abc.abstractmethod
    def stopping(self) -> None:
        """mcpd stops: each request of its in flight is answered now."""

    @abc.abstractmethod
    def news_sender(self) -> Callable[[bytes], None]:
        """Where what answers no request goes later (a subscribed resource's updates)."""


class Sent(msgspec.Struct, frozen=True):
    """What a call goes to its server under, which each round after its first is looked
    at again against (``again``): its tool as its profile listed it, and the rules'
    decision (an ``ask``'s, once a person approved the call); and for a modern agent's
    call that its server answered ``input_required``, how many times the agent came
    back with answers (``resumes``)."""

    entry: Entry
    profile: Profile
    decision: Decision
    rounds: int = 0


class AgentCall(msgspec.Struct, eq=False):
    """A tools/call as the agent side keeps it: ``out``, the ``Call`` the servers are
    handed (this is its caller), and what only this side reads of it."""

    out: Call
    agent: Agent
    to: OutcomeSink  # where its outcome goes now: its agent, or a task awaiting it
    modern: bool = False  # the agent speaks 2026-07-28
    tasks: bool = False  # the agent takes task handles for results
    arrived: float = 0.0  # Unix time its request was read
    # -- how it was routed --
    profile: str = ""  # the agent's profile it was routed in, which its record names
    # Routed past the lookup of the name it calls (``out.name``) in its profile, which
    # has that tool: its record names it so (False: a name the profile does not have,
    # or not looked up, is named in mcpd's words for a name it does not know).
    known: bool = False
    # What the agent's profile shows of resources: the links in its result are handed
    # over as that profile reads them back (None: as the daemon's owner does).
    sight: Sight | None = None
    # A held tool's server and the server's name for it: the call is refused, never
    # routed, and its record names them all the same.
    held: tuple[str, str] | None = None
    # What the rules let it through with, when it went to its server without a task
    # (``toolcall.Router.start``): should its server answer ``input_required`` asking
    # nothing, its rounds go on in a task, each looked at again under this first.
    let_through: Sent | None = None
    # -- what its audit record says --
    decision: str = "allow"  # the policy's, how the person asked decided, or none (no rule asked)
    decided_by: str = "default"  # the rule (policy[2]), or who decided
    refusal: str | None = None  # why mcpd answered it itself, in a few words
    recorded: bool = False  # its record is made (or is another call's, which it continues)

    def sent(self) -> Call:
        """``out``, to hand to the servers now: it names this as its caller."""
        out = self.out
        out.caller = self
        return out

    def finish(self, outcome: Outcome) -> None:
        """The servers' outcome of ``out`` (``servers.calling.calls.Caller``): they are done
        with it."""
        self.out.caller = NO_ONE
        self.to.finish(self, outcome)

    def let_go(self) -> None:
        """The agent side stops waiting for ``out``: its server is told, if it has it,
        and no outcome comes."""
        out = self.out
        out.cancel()
        out.caller = NO_ONE

    def whose(self) -> Whose:
        """``servers.calling.calls.Caller``."""
        return self.agent.whose()

    # What a result is shaped by that the servers' part of the call holds
    # (``results.Recipient``).
    @property
    def alias(self) -> str:
        return self.out.alias

    @property
    def owner(self) -> AgentKey:
        return self.out.owner

    @property
    def capabilities(self) -> rpc.JsonObject | None:
        return self.out.capabilities

    @property
    def session(self) -> SessionMark | None:
        return self.out.session


class _NoOne:
    """The caller of a ``Call`` the agent side waits for at no server: not handed to
    them yet, or let go. An outcome that comes all the same is late, and dropped."""

    def finish(self, outcome: Outcome) -> None:
        pass

    def whose(self) -> Whose:
        raise AssertionError("a call waits at a server it was never handed to")


NO_ONE: Final = _NoOne()
