"""One tools/call, from the agent that sent it to its server and back: the ``Call``
every layer takes, and the ``Outcome`` that comes back.

The agent side makes a ``Call`` once, as it decodes the request (with either of its
decoders), and the same object goes down every layer with one verb, ``start(call)``:
the agent side's router names its server, ``AllServers`` finds that server, its scheduler
admits and times it, its ``Upstream`` writes it in the server's era and hands it to the
transport. The server's answer comes back through the call itself (a transport calls
it with what arrived), and the one outcome of the call goes to
``call.caller.finish(outcome)`` exactly once: the agent side shapes the reply there and
writes it.
"""

from __future__ import annotations

import abc
import math
from typing import Any, ClassVar, Final, Literal, Protocol, TypeAlias

import msgspec
import trio
from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import RequestContext

from ...config.tables.model import Config
from ...policy.agent import agent_key
from ..asking.askback import Asker
from ..asking.ended_asks import End
from ..asking.progress import ProgressSink
from ..life.task_holds import TaskHolds
from ..status.outage import Outage
from .agent_key import NOBODY, AgentKey

# The code of mcpd's refusal of a request past a bound on the bytes waiting: that of
# an outage's, though it is none (the item asked for exists, and the server keeps
# working).
UNQUEUED: Final = -32000
_encode: Final = msgspec.json.Encoder().encode

# A call's one outcome: the server's raw result, why it could not be reached, the
# server's JSON-RPC error, or a result of mcpd's own (an unknown tool, a search).
Outcome: TypeAlias = Raw | Outage | rpc.RPCError | mcp.CallToolResult


class CallEnd:
    """A call's one outcome, of a type that says how the call ended: no outcome mcpd
    made itself can pass for its server's answer (``ended_asks``)."""

    __slots__ = ("outcome",)
    end: ClassVar[End]

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome


class Answered(CallEnd):
    """The server's reply: a result, its error, or one mcpd could not pass on."""

    __slots__ = ()
    end = End.ANSWERED


class Unanswered(CallEnd):
    """Ended by mcpd after it was sent (out of time, the connection gone): the server
    may still be at work on it."""

    __slots__ = ()
    end = End.UNANSWERED


class Unsent(CallEnd):
    """Ended by mcpd before it reached the server (refused, busy, no session)."""

    __slots__ = ()
    end = End.UNSENT


class Unqueued(rpc.RPCError):
    """mcpd's refusal of a request other than tools/call, which would have kept its
    agent's, its user's or everyone's bytes past their bound (``queue_bytes``): the
    agent's JSON-RPC error, and ``reason``, its audit record's."""

    def __init__(self, message: str, data: object, reason: str) -> None:
        super().__init__(UNQUEUED, message, data)
        self.reason = reason


class CallRefused(Exception):
    """A request could not reach its server; ``outage`` says why."""

    def __init__(self, outage: Outage) -> None:
        super().__init__(outage.reason)
        self.outage = outage


class Whose(msgspec.Struct, frozen=True, gc=False):
    """Whose a call is, as the bytes of calls waiting for their servers are shared out
    (``queue_bytes``): its user (None: one mcpd cannot name) and process (None: none
    found), and whether the user is mcpd's own or root."""

    uid: int | None
    pid: int | None
    own: bool

    @property
    def agent(self) -> str:
        return agent_key(self.pid, self.uid)


class SessionMark:
    """One session of mcpd's with a server, from its connection to its end (a process
    killed, a reload's restart, a connection lost): what was made in it, such as a
    task, is bound to it, as a server that starts again may give the same ids anew.
    Compared by identity, and small, so that whatever outlives the session can keep it.
    ``holds``: its tasks still running, which keep a lazy server from being idle."""

    __slots__ = ("holds",)

    def __init__(self) -> None:
        self.holds = TaskHolds()


class Caller(Protocol):
    """Who gets a call's outcome: the agent side that started it, in its own object of
    the call, which keeps what only that side reads (how it was routed and decided)."""

    def finish(self, outcome: Outcome) -> None:
        """The call's one outcome (never raised into: it is written, or kept)."""
        ...

    def whose(self) -> Whose:
        """Whose its calls are: asked only of a call that is to wait for its server."""
        ...


class Admitter(abc.ABC):
    """What a call tells the scheduler that admitted it (``scheduler.CallScheduler``,
    which derives from this: it imports this module)."""

    @abc.abstractmethod
    def cancel(self, call: Call) -> None: ...

    @abc.abstractmethod
    def extend(self, call: Call, seconds: float) -> None: ...

    @abc.abstractmethod
    def received(self, call: Call, raw: Raw | None, error: BaseException | None) -> None: ...


# Where a call is on its way: made; waiting for a slot at its server; sent to it;
# its answer being taken apart; ended with an outcome; given up by its agent.
CallState: TypeAlias = Literal["new", "queued", "running", "answered", "done", "cancelled"]


class Call(msgspec.Struct, eq=False):
    """One tools/call on its way. The agent side fills in what the request said and
    where it goes; the scheduler and the upstream keep their own state of it here, so
    a call costs this one object on its way down and back. What only the agent side
    reads (how it routed and decided the call, for its reply and audit record) is its
    caller's, not here."""

    # -- what the agent sent, decoded once --
    id: rpc.Id  # the agent's request id, which its reply carries
    # The tool as the agent named it (the one a meta-call names, once unwrapped): what
    # its profile and its audit record know it by. Never what goes to the server.
    name: str
    arguments: Raw | UnsetType  # passed on as they came
    caller: Caller
    ctx: RequestContext  # the agent's era and capabilities, from the request's _meta
    # The agent's own _meta keys, passed on (the reserved ones are mcpd's to set).
    meta: mcp.Meta | None = None
    input_responses: Raw | UnsetType = UNSET
    request_state: Raw | UnsetType = UNSET
    progress: ProgressSink | None = None  # where the server's progress reports go
    asker: Asker | None = None  # the agent, for what a legacy server asks back
    owner: AgentKey = NOBODY  # whose call it is (a task it creates is theirs alone)
    # Whether its request and reply may be written around the bytes they carry
    # (``protocol.jsonrpc.splice``) rather than encoded: the daemon's switch.
    splice: bool = True
    # -- where it goes (the agent side's router's) --
    alias: str = ""  # its server
    original: str = ""  # the tool's own name at that server: the one its request carries
    # What the server is told this agent can answer (a modern server's envelope).
    capabilities: dict[str, Any] | None = None
    # -- on its way (the scheduler's and the upstream's) --
    state: CallState = "new"
    timeout: float = 0.0  # for the server's answer (0: the configured one)
    deadline: float = math.inf
    limit: float = math.inf  # the hard limit progress cannot push the deadline past
    sent_at: float = 0.0  # when it went to its server, on the scheduler's clock
    # Its admission by its server's breaker: the breaker's epoch then (what it reports
    # of the server counts only while that holds), and whether it is the probe.
    ticket: int = 0
    probe: bool = False
    sent_id: rpc.Id | None = None  # the id its request went under, when a transport sent it
    # Its answer's head as the scheduler read it, for the agent side to shape the
    # result by, when that answer goes on as it came (None: not read, or changed).
    head: mcp.CallToolResultKinds | None = None
    session: SessionMark | None = None  # the session it was sent in
    progress_token: str | None = None  # mcpd's, in place of its agent's, at the server
    scope: trio.CancelScope | None = None  # a call sent from a task of its own
    scheduler: Admitter | None = None
    # Whether the server's requests during it go to its asker (a legacy server), and
    # how many of them wait for that agent's answer now (``servers.asking.askback``).
    relays: bool = False
    asking: int = 0
    # What it keeps while it waits for a slot at its server, and whose it is: set once
    # it is to wait (``queue_bytes``), never for a call sent at once.
    kept: int = 0
    whose: Whose | None = None
    # Why it may not wait after all (its bytes past a bound), in its audit record's
    # words: set as it is refused, as its outcome says the same to its agent.
    unqueued: str | None = None

    def weight(self) -> int:
        """The bytes the call would keep while it waits (for its server, or for a
        person): what it carries to its server, and its request's ``_meta``."""
        carried = (self.arguments, self.request_state, self.input_responses)
        kept = sum(len(part) for part in carried if isinstance(part, Raw))
        return kept + (len(_encode(self.ctx.meta)) if self.ctx.meta else 0)

    def kept_apart(self) -> int:
        """``weight``, once what the call carries is copied out of its agent's line (a
        part of a line keeps the whole of it): no more than that is kept while it
        waits."""
        self.arguments = _copied(self.arguments)
        self.request_state = _copied(self.request_state)
        self.input_responses = _copied(self.input_responses)
        return self.weight()

    def __call__(self, raw: Raw | None, error: Exception | None) -> None:
        """The transport's answer to the call's request (``transports.base.ReplySink``): the
        server's result or error, or the transport's failure. Not the call's outcome:
        its scheduler makes that of it, and ``caller.finish`` gets it."""
        if self.scheduler is not None:
            self.scheduler.received(self, raw, error)

    def extend(self, seconds: float) -> None:
        """Give the call this many seconds from now (its server waits for its agent)."""
        if self.scheduler is not None:
            self.scheduler.extend(self, seconds)

    def cancel(self) -> None:
        """The agent gave up (it cancelled, or left): the server is told, if it has the
        call already, and no outcome is delivered."""
        if self.scheduler is not None:
            self.scheduler.cancel(self)


def _copied(part: Raw | UnsetType) -> Raw | UnsetType:
    return Raw(bytes(part)) if isinstance(part, Raw) else part


class QueuedCheck(abc.ABC):
    """What the agent side says of a call that waits in a server's queue, once what
    routed it changed (a reload's rules and profiles, its tool held or gone): the
    servers hold the queue, the agent side decides."""

    @abc.abstractmethod
    def refusal(self, call: Call) -> mcp.CallToolResult | None:
        """None while ``call`` may still be sent; else the result it ends with, unsent."""


class CallLimits:
    """How long one server's tools may take, and how many of its calls may wait for a
    slot and for how long, as the config in force sets it: each tool's limit is looked
    up once, at its first call (a reload makes a new one)."""

    __slots__ = ("_alias", "_config", "_timeouts", "max_call_time", "queue_size", "queue_timeout")

    def __init__(self, alias: str, config: Config) -> None:
        self._alias = alias
        self._config = config
        self._timeouts: dict[str, float] = {}  # the server's own tools': it stays small
        d = config.daemon
        # How long progress can keep any call going (daemon.max_call_time).
        self.max_call_time = d.max_call_time
        self.queue_size = d.queue_size
        self.queue_timeout = d.queue_timeout

    def timeout(self, tool: str) -> float:
        found = self._timeouts.get(tool)
        if found is None:
            found = self._timeouts[tool] = self._config.call_timeout(self._alias, tool)
        return found

    def source(self, tool: str, timeout: float) -> str | None:
        """The config key that set ``timeout`` for calls of ``tool`` (None: not the
        config: the caller's own limit)."""
        limit, key = self._config.call_limit(self._alias, tool)
        return key if timeout == limit else None
