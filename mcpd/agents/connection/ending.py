"""What an agent's connection has in flight, and how it ends with requests in flight.

A request joins what is in flight (``RequestsInFlight``) if its id is free and the agent
is under its limit (``admit``); one the agent cancels is given up. The agent hangs up (or
sends a line over the limit, or one that does not fit or end in time, and is told that
nothing after it is read, ``refuse_cut``): what it has in flight is given up, and what
is queued for it still goes out if it can. Its profile is removed (``leave``): each
request from then on is refused, saying why; those in flight are given a grace to be
answered, those left then are answered with why, and it closes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Final, Protocol

import trio

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.splice import SplicedRequest
from protocol.lines.framing import Oversized
from protocol.mcp import core as mcp
from protocol.shown.logfields import log_extra

from ..agent import Agent, AgentCall
from ..calls.callrecords import AT_LIMIT
from ..calls.toolcall import Router
from .line_reader import Unfinished
from .misbehaviour import Misbehaviour
from .outbox import Outbox

logger = logging.getLogger("mcpd.agents")


def refused_while_ending(reason: str) -> str:
    """What a request sent on a connection that ends for ``reason`` is refused with."""
    return f"{reason}: this connection closes once its requests in flight are answered"


def late_while_ending(reason: str, grace: float) -> str:
    """What a request still in flight once the ``grace`` it was given is over is
    answered with, its connection ending for ``reason``."""
    return f"{reason}, and this request was not answered in the {grace:g} s it was given"


STOPPING: Final = "mcpd is stopping"
UNANSWERED: Final = "this request was ended before it was answered"


# How long the answers written as mcpd stops may take to go out, to all agents
# together: one that does not read cannot hold the stop.
_STOP_WRITES: Final = 2.0


class Stops(Protocol):
    """What holds requests in flight as mcpd stops: an agent's connection, or the
    requests being answered over HTTP."""

    def stopping(self) -> None: ...

    async def drain(self) -> None: ...


async def answer_stopping(connections: Iterable[Stops]) -> None:
    """mcpd stops: every request in flight on each of ``connections`` is answered,
    saying so, and written out unless its agent does not read it at once."""
    ending = list(connections)
    for conn in ending:
        conn.stopping()
    with trio.move_on_after(_STOP_WRITES):
        for conn in ending:
            await conn.drain()


def stopped_answer(rid: rpc.Id, call: AgentCall | None, modern: bool) -> bytes:
    """The answer to the request ``rid`` (a tools/call: its ``call``), ended as mcpd
    stops. Whether a call may have run depends on whether it ever went to its server:
    one that waited for a person's approval, or to be routed, never did."""
    if call is None:
        return rpc.encode_error(rid, -32000, f"{STOPPING}: {UNANSWERED}")
    if call.out.state == "new":
        text = (
            f"{STOPPING}, and this call was not sent to its tool server, so it did not "
            "run: it can be made again once mcpd is back."
        )
    else:
        text = (
            f"{STOPPING}, and this call was ended before its tool server answered. It "
            "may have reached the server, so whether it ran is not known: check before "
            "calling this tool again once mcpd is back."
        )
    result = mcp.CallToolResult(content=[mcp.TextContent(text)], isError=True)
    if modern:
        result.resultType = mcp.COMPLETE
    return rpc.encode_result(rid, result)


class RequestsInFlight:
    """What one agent's connection has in flight, by id: a call started without a task,
    or the scope of a request answered in a task of its own; and what it does with
    them as the connection ends."""

    def __init__(
        self, agent: Agent, router: Router, limit: int, outbox: Outbox, faults: Misbehaviour
    ) -> None:
        self.agent = agent
        self.router = router
        self.limit = limit
        self.outbox = outbox
        # What cancels each request in flight: its task's scope, or the call itself.
        self.requests: dict[rpc.Id, trio.CancelScope | AgentCall] = {}
        self.calls_in_tasks: dict[rpc.Id, AgentCall] = {}  # the tools/call among the tasks
        # Why each request is refused from now on: the connection is ending (``leave``).
        self.leaving: str | None = None
        self.faults = faults
        self._settled: trio.Event | None = None  # set once nothing is in flight, while it ends

    def admit(self, rid: rpc.Id, holds_slot: bool, request: SplicedRequest | rpc.Request) -> bool:
        """Whether a request may start: its id is free and, if it holds a slot, the agent
        is under its in-flight limit; otherwise it is answered with an error here, and
        leaves its audit record if it is a call."""
        agent, records = self.agent, self.router.records
        if self.leaving is not None:
            agent.send_nowait(rpc.encode_error(rid, -32000, self.leaving), rid)
            records.turned_away(agent, request, self.leaving)
            return False
        if rid in self.requests:
            error = f"id {rid!r} is already in use"
            agent.send_nowait(rpc.encode_error(rid, rpc.INVALID_REQUEST, error))
            records.turned_away(agent, request)
            return False
        if holds_slot and len(self.requests) >= self.limit:
            self.faults.refused_at_limit(agent.label, self.limit)
            said = f"too many requests in flight on this connection (limit {self.limit})"
            agent.send_nowait(rpc.encode_error(rid, -32000, said), rid)
            records.turned_away(agent, request, AT_LIMIT)
            return False
        return True

    def forget(self, rid: rpc.Id) -> None:
        """``rid`` is in flight no longer (which a connection that ends waits for)."""
        self.requests.pop(rid, None)
        self.calls_in_tasks.pop(rid, None)
        if not self.requests and self._settled is not None:
            self._settled.set()

    def cancelled(self, rid: rpc.Id) -> None:
        """The agent cancelled ``rid``: a call is forgotten now and given up; a task is
        cancelled, and forgets it as it ends."""
        handle = self.requests.get(rid)
        if isinstance(handle, AgentCall):
            self.forget(rid)
            self.outbox.unbatch(rid)
        if handle is not None:
            self.give_up(handle)

    def let_go(self) -> None:
        """Its requests in flight end: each is given up."""
        handles = list(self.requests.values())
        self.requests.clear()
        for handle in handles:
            self.give_up(handle)

    def give_up(self, handle: trio.CancelScope | AgentCall) -> None:
        """A request in flight ends unanswered: a call is cancelled (its server is told,
        it leaves its record), and a task of its own too."""
        if isinstance(handle, trio.CancelScope):
            handle.cancel()
        else:
            self.router.abandon(handle)

    def stopping(self, modern: bool) -> None:
        """mcpd stops: each request in flight is answered now, before the connection
        closes; a call with a result that says it may have run, any other request with
        an error. Each request sent from now on is refused, saying why."""
        self.leaving = STOPPING
        for rid, handle in self.requests.items():
            call = handle if isinstance(handle, AgentCall) else self.calls_in_tasks.get(rid)
            self.outbox.put(stopped_answer(rid, call, modern), rid)
        self.let_go()

    async def leave(self, reason: str, grace: float) -> None:
        """The connection ends for ``reason``: each request sent from now on is refused
        with it; those in flight get ``grace`` seconds to be answered, and those still
        in flight then are answered with it (a call's server is told it was cancelled)."""
        self.leaving = refused_while_ending(reason)
        if self.requests:
            self._settled = trio.Event()
            with trio.move_on_after(grace):
                await self._settled.wait()
        late = late_while_ending(reason, grace)
        for rid in self.requests:
            self.outbox.put(rpc.encode_error(rid, -32000, late), rid)
        self.let_go()


async def refuse_cut(
    cut: Oversized | Unfinished, label: str, send: Callable[[bytes], Awaitable[None]]
) -> None:
    """The agent ``label`` sent a line over the limit, or one that did not fit or end
    in time: it is told why nothing after that line is read."""
    if isinstance(cut, Oversized):
        logger.warning(
            "%s sent a line over %d bytes; closing its connection",
            label,
            cut.limit,
            extra=log_extra(None, reason="oversized line"),
        )
        said = f"message exceeds the {cut.limit} byte line limit; closing"
        await send(rpc.encode_error(None, rpc.INVALID_REQUEST, said))
        return
    logger.warning(
        "%s: closing its connection in the middle of a line: %s",
        label,
        cut.why,
        extra=log_extra(None, reason="unfinished line"),
    )
    said = f"mcpd: closing this connection in the middle of a line: {cut.why}"
    with trio.move_on_after(1):
        await send(rpc.encode_error(None, -32000, said))
