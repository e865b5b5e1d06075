"""A tools/call on its way to a server: its outcome types, the call itself, what the
scheduler (``scheduler``) needs of its server, and awaiting a call's outcome."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any, Protocol, TypeAlias

import trio
from msgspec import Raw

from protocol import jsonrpc as rpc
from protocol import mcp

from ..config.model import Config, DaemonConfig
from .askback import Asker, AskRoutes
from .breaker import Breaker
from .outage import Outage
from .progress import Deliver, ProgressRoutes
from .stats import LatencyStats

logger = logging.getLogger("mcpd.calls")

Outcome: TypeAlias = Raw | Outage | rpc.RPCError
Done: TypeAlias = Callable[[Outcome], None]


class CallRefused(Exception):
    """The call could not reach its server; ``outage`` says why."""

    def __init__(self, outage: Outage) -> None:
        super().__init__(outage.reason)
        self.outage = outage


_LIVE = frozenset({"queued", "running"})


class _Scheduler(Protocol):
    def cancel(self, call: PendingCall) -> None: ...

    def extend(self, call: PendingCall, seconds: float) -> None: ...

    def complete(self, call: PendingCall, raw: Raw | None, error: BaseException | None) -> None: ...


class CallHost(Protocol):
    """What a scheduler needs of the server it schedules calls for (its runner)."""

    alias: str
    breaker: Breaker
    stats: LatencyStats
    progress: ProgressRoutes
    asks: AskRoutes

    @property
    def settings(self) -> DaemonConfig: ...

    @property
    def transport_kind(self) -> str: ...

    def waits_for_start(self) -> bool:
        """Whether a call that finds the server down should wait for it to come up."""
        ...

    def outage(self) -> Outage: ...

    def availability_failure(self, elapsed: float, reason: str, ticket: int) -> None: ...

    def check_liveness(self) -> None:
        """A call failed in a way that may mean the server is gone: find out soon."""
        ...

    def limit_source(self, tool: str, timeout: float) -> str | None:
        """The config key that set ``timeout`` for calls of ``tool`` (None: not the
        config), for a timed-out call to say what to raise."""
        ...


class CallLimits:
    """How long one server's tools may take, as the config in force sets it: each
    tool's limit is looked up once, at its first call (a reload makes a new one)."""

    __slots__ = ("_alias", "_config", "_timeouts")

    def __init__(self, alias: str, config: Config) -> None:
        self._alias = alias
        self._config = config
        self._timeouts: dict[str, float] = {}  # the server's own tools': it stays small

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


class PendingCall:
    """One tools/call on its way through a server's scheduler."""

    __slots__ = (
        "asker",
        "asking",
        "capabilities",
        "deadline",
        "limit",
        "on_cancel",
        "on_done",
        "on_progress",
        "params",
        "probe",
        "rid",
        "scheduler",
        "scope",
        "start",
        "state",
        "ticket",
        "timeout",
        "token",
    )

    def __init__(
        self,
        params: mcp.CallToolParams,
        capabilities: dict[str, Any] | None,
        timeout: float,
        on_progress: Deliver | None,
        on_done: Done,
    ) -> None:
        self.params = params
        self.capabilities = capabilities
        self.timeout = timeout
        self.on_progress = on_progress
        self.on_done = on_done
        self.state = "new"  # new | queued | running | done | cancelled
        self.deadline = math.inf
        self.limit = math.inf
        self.start = 0.0
        self.ticket = 0
        self.probe = False
        self.rid: rpc.Id | None = None
        self.token: str | None = None
        self.scope: trio.CancelScope | None = None
        self.scheduler: _Scheduler | None = None
        self.on_cancel: Callable[[], None] | None = None
        # The agent behind the call, for what its server asks back (servers.askback),
        # and how many of the server's requests about it wait for that agent now.
        self.asker: Asker | None = None
        self.asking = 0

    def __call__(self, raw: Raw | None, error: Exception | None) -> None:
        """The server's answer (or the transport's failure), from the transport."""
        if self.scheduler is not None:
            self.scheduler.complete(self, raw, error)

    def extend(self, seconds: float) -> None:
        """Give the call this many seconds from now (its server waits for its agent)."""
        if self.scheduler is not None:
            self.scheduler.extend(self, seconds)

    def cancel(self) -> None:
        """The caller gave up (agent cancel or disconnect): the server is told, if it
        already has the call, and no outcome is delivered."""
        if self.scheduler is not None:
            self.scheduler.cancel(self)
        if self.on_cancel is not None:
            self.on_cancel()


class _Start(Protocol):
    def __call__(
        self,
        params: mcp.CallToolParams,
        on_done: Done,
        *,
        capabilities: dict[str, Any] | None = ...,
        on_progress: Deliver | None = ...,
        timeout: float | None = ...,
    ) -> PendingCall: ...


async def wait_for(
    start: _Start,
    params: mcp.CallToolParams,
    *,
    capabilities: dict[str, Any] | None,
    on_progress: Deliver | None,
    answer_within: float | None,
) -> Raw:
    """A call started by ``start``, awaited: its raw result, or CallRefused (with the
    Outage) or the server's rpc.RPCError. Cancelling the caller cancels the call."""
    done = trio.Event()
    box: list[Outcome] = []

    def finished(outcome: Outcome) -> None:
        box.append(outcome)
        done.set()

    call = start(
        params, finished, capabilities=capabilities, on_progress=on_progress, timeout=answer_within
    )
    try:
        await done.wait()
    except BaseException:
        call.cancel()
        raise
    outcome = box[0]
    if isinstance(outcome, Outage):
        raise CallRefused(outcome)
    if isinstance(outcome, rpc.RPCError):
        raise outcome
    return outcome
