"""A tools/call started by a test below the agent side, and its outcome awaited: at a
runner's scheduler (as ``AllServers.start`` starts it), or at a bare ``Upstream``."""

from __future__ import annotations

from typing import Any

import trio
from msgspec import UNSET, Raw, UnsetType

from mcpd.servers.asking.progress import ProgressSink
from mcpd.servers.calling.calls import Call, CallRefused, Outcome, Whose
from mcpd.servers.connected.upstream import Upstream
from mcpd.servers.life.server_parts import ServerParts
from mcpd.servers.status.outage import Outage
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import RequestContext

# An agent of today's era that declared nothing.
AGENT = RequestContext("modern", mcp.LATEST_MODERN, {}, {})


# Whose a test's call is, unless it says: a process of a user other than mcpd's own.
SOMEONE = Whose(uid=4242, pid=4243, own=False)


class Outcomes:
    """The caller of a test's call (``whose`` it is): its one outcome; and where a test
    stands in for the scheduler (at a bare upstream), the answer or failure the
    transport hands it."""

    def __init__(self, whose: Whose = SOMEONE) -> None:
        self._whose = whose
        self.arrived = trio.Event()
        self.outcome: Outcome | None = None
        self.error: BaseException | None = None  # what a transport failed with
        self.upstream: Upstream | None = None  # where a call cancelled is given up

    def finish(self, outcome: Outcome) -> None:
        assert not self.arrived.is_set(), "a second outcome for one call"
        self.outcome = outcome
        self.arrived.set()

    def whose(self) -> Whose:
        return self._whose

    # What a transport's answer reaches at a bare upstream (``Call.__call__``).
    def received(self, call: Call, raw: Raw | None, error: BaseException | None) -> None:
        if not self.arrived.is_set():
            self.outcome, self.error = raw, error
            self.arrived.set()

    def extend(self, call: Call, seconds: float) -> None:
        pass

    def cancel(self, call: Call) -> None:
        if self.upstream is not None:
            self.upstream.forget(call, "cancelled by the client")

    async def result(self, call: Call) -> Raw:
        """The raw result, or CallRefused (with the outage) or the server's RPCError;
        cancelling the waiter cancels the call."""
        try:
            await self.arrived.wait()
        except BaseException:
            call.cancel()
            raise
        if self.error is not None:
            raise self.error
        outcome = self.outcome
        if isinstance(outcome, Outage):
            raise CallRefused(outcome)
        if isinstance(outcome, rpc.RPCError):
            raise outcome
        assert isinstance(outcome, Raw), outcome
        return outcome


def a_call(
    name: str,
    arguments: Raw | UnsetType = UNSET,
    *,
    meta: dict[str, Any] | None = None,
    capabilities: dict[str, Any] | None = None,
    progress: ProgressSink | None = None,
    timeout: float = 0.0,
    whose: Whose = SOMEONE,
) -> tuple[Call, Outcomes]:
    outcomes = Outcomes(whose)
    call = Call(
        0,
        name,
        arguments,
        outcomes,
        AGENT,
        original=name,  # as routed: a name the server has
        meta=meta,
        progress=progress,
        capabilities=capabilities,
        timeout=timeout,
    )
    return call, outcomes


async def at_runner(
    runner: ServerParts,
    params: mcp.CallToolParams,
    *,
    call_timeout: float | None = None,
    on_progress: ProgressSink | None = None,
) -> Raw:
    """``params`` called at the runner's scheduler: the raw result, or CallRefused or
    the server's RPCError."""
    meta = params.meta if isinstance(params.meta, dict) else None
    call, outcomes = a_call(
        params.name, params.arguments, meta=meta, progress=on_progress, timeout=call_timeout or 0
    )
    runner.scheduler.start(call)
    return await outcomes.result(call)


async def at_upstream(
    up: Upstream, params: mcp.CallToolParams, *, capabilities: dict[str, Any] | None = None
) -> Raw:
    """``params`` sent by ``up`` with no scheduler in between: with no progress routes
    either, the server gets the agent's progress token as it is."""
    meta = params.meta if isinstance(params.meta, dict) else None
    call, outcomes = a_call(params.name, params.arguments, meta=meta, capabilities=capabilities)
    call.scheduler, call.state, outcomes.upstream = outcomes, "running", up
    call.progress_token = meta.get(mcp.KEY_PROGRESS_TOKEN) if meta is not None else None
    async with trio.open_nursery() as nursery:
        up.nursery = nursery  # where an HTTP call waits for its answer
        up.start(call)
        raw = await outcomes.result(call)
        nursery.cancel_scope.cancel()
    return raw


async def cancelled() -> trio.Cancelled:
    """A cancellation as trio raises it in a cancelled scope (to hand to code that
    tells cancellations from failures)."""
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            caught = exc
            raise
    return caught
