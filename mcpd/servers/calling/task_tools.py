"""Tools a legacy (2025-11-25) server runs only as tasks, called for agents as plain tools.

Such a server marks a tool ``execution.taskSupport: "required"`` and refuses a plain
``tools/call`` of it. Agents are offered no legacy tasks of mcpd's (a host that saw the
marker would refuse to call the tool without one), so mcpd holds the task itself:
the tool is listed without the marker, its call goes to the server with a ``task``
param, and the task's outcome, awaited with ``tasks/result`` (which the server holds
open until the task ends), is the call's result. A call given up (cancelled by its
agent, out of time) gives the task up at the server too, with ``tasks/cancel``.

Which tools need this is settled when the server lists them; a call only looks its
name up in a set. "optional" tools stay plain calls: the server runs those either way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

import msgspec
import trio
from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply, MessageTooLarge
from protocol.mcp import core as mcp
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote
from transports.base import Params
from transports.errors import ServerCancelled, TransportError

from ..asking.askback import ASKING
from .calls import Call
from .outgoing_meta import CallMeta

logger = logging.getLogger("mcpd.calls")

# How long giving a task up may hold the call's end: the agent has its answer (or
# has left) already, and a server that does not answer is not waited for.
CANCEL_GRACE: Final = 5.0
# A task id names a task and nothing more: a counter, a UUID, a key with a signature
# fit many times over. One longer is a server making mcpd hold what it likes (it is
# kept as long as the task is, sent back with every request about it, and logged).
MAX_TASK_ID: Final = 512  # bytes, as UTF-8


class _Execution(msgspec.Struct):
    taskSupport: Any = None


class _TaskRequest(msgspec.Struct):
    ttl: int  # ms the server keeps the task and its result


class TaskCallParams(mcp.CallToolParams, omit_defaults=True):
    task: _TaskRequest | UnsetType = UNSET


class _TaskRef(msgspec.Struct):
    taskId: str


class _Handle(msgspec.Struct):
    taskId: str


class _Created(msgspec.Struct):
    task: _Handle | None = None


class SessionRequest(Protocol):
    """``Upstream.request``: a request in the server's session, and its result."""

    async def __call__(
        self,
        method: str,
        params: Params,
        *,
        name: str | None = ...,
        extra_headers: Mapping[str, str] | None = ...,
        cancellable: bool = ...,
    ) -> Raw: ...


_execution: Final = msgspec.json.Decoder(_Execution)
_created: Final = msgspec.json.Decoder(_Created)
_encode: Final = msgspec.json.Encoder().encode


def task_tools(tools: Sequence[mcp.Tool], runs_tool_tasks: bool) -> frozenset[str]:
    """The names of the tools that run only as tasks; each is left listed without the
    marker, which agents must not act on (mcpd takes no task-augmented calls).
    ``runs_tool_tasks``: whether the server says it takes task-augmented tools/call
    (``ServerCapabilities.tool_tasks``); without that, the spec forbids sending one,
    whatever a tool says."""
    if not runs_tool_tasks:
        return frozenset()
    names: set[str] = set()
    for tool in tools:
        execution = tool.execution
        if not isinstance(execution, Raw):
            continue
        try:
            support = _execution.decode(execution).taskSupport
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if support != "required":
            continue
        names.add(tool.name)
        rest = msgspec.json.decode(execution)
        del rest["taskSupport"]
        tool.execution = Raw(_encode(rest)) if rest else UNSET
    return frozenset(names)


async def call_as_task(
    request: SessionRequest,
    alias: str,
    params: mcp.CallToolParams,
    headers: Mapping[str, str] | None,
    ttl: float,
) -> Raw:
    """A tools/call (``params`` and ``headers`` as a plain one would go) for a tool that
    runs only as a task at the server ``alias``, sent with ``request`` and kept up to
    ``ttl`` seconds there: the result it ended
    with. Raises as a request does; the task's own JSON-RPC error comes as
    rpc.RPCError."""
    asked = TaskCallParams(
        params.name,
        params.arguments,
        meta=params.meta,
        task=_TaskRequest(ttl=round(ttl * 1000)),
    )
    created = await request("tools/call", asked, name=asked.name, extra_headers=headers)
    try:
        handle = _created.decode(created).task
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        # A task mcpd cannot name is no result: it cannot be waited for, nor given up.
        raise _malformed(alias, f"its task handle is malformed: {exc}") from None
    if handle is None:
        return created  # the server ran it at once after all: that is the result
    size = len(handle.taskId.encode())
    if size > MAX_TASK_ID:
        reason = f"the server named its task with an id of {size} bytes, past the "
        raise _malformed(alias, reason + f"{MAX_TASK_ID} mcpd keeps")
    ref = _TaskRef(handle.taskId)
    try:
        return await request("tasks/result", ref)
    except rpc.RPCError as exc:
        if exc.code != rpc.METHOD_NOT_FOUND:
            raise  # the task ended with this error: it is the call's outcome
        await _give_up(request, alias, ref, "tasks/result was refused")
        raise
    except BaseException:
        # Cancelled (by the agent or the call's time limit) or cut off: nobody will
        # ever ask for this task's result, so the server can stop working on it.
        await _give_up(request, alias, ref, "the call ended before the task")
        raise


async def run_call(request: SessionRequest, alias: str, meta: CallMeta, call: Call) -> None:
    """``call`` of a tool that runs only as a task at the server ``alias`` (sent with
    ``request``), in a task of its session's nursery: its outcome goes to the call,
    once; the call's scope gives it up."""
    if call.state != "running":
        return  # given up before this task began: never sent
    call.scope = trio.CancelScope()
    # This task's own agent: an HTTP server's request on the task's streams is
    # relayed to it.
    ASKING.set(call.asker)
    try:
        with call.scope:
            try:
                ttl = call.limit - call.sent_at  # kept at the server as long as it may run
                params, headers = meta.params(call), meta.param_headers(call)
                raw = await call_as_task(request, alias, params, headers, ttl)
            except (
                TransportError,
                rpc.RPCError,
                ServerCancelled,
                MessageTooLarge,
                MalformedReply,
            ) as exc:
                call(None, exc)
            else:
                call(raw, None)
    finally:
        # The connection to the server is being torn down under this call.
        call(None, TransportError(f"{alias}: connection closed"))


async def _give_up(request: SessionRequest, alias: str, ref: _TaskRef, why: str) -> None:
    with trio.move_on_after(CANCEL_GRACE, shield=True) as scope:
        try:
            await request("tasks/cancel", ref, cancellable=False)
        except Exception as exc:
            # Finished meanwhile (the server refuses to cancel a finished task), or
            # the server is gone: either way nothing is left to stop.
            logger.info(
                "%s: could not cancel task %r (%s): %s",
                alias,
                ref.taskId,
                why,
                f"the error {quote(exc.message)}" if isinstance(exc, rpc.RPCError) else exc,
                extra=log_extra(alias),
            )
    if scope.cancelled_caught:
        logger.info(
            "%s: no answer to cancelling task %r within %g s",
            alias,
            ref.taskId,
            CANCEL_GRACE,
            extra=log_extra(alias),
        )


def _malformed(alias: str, reason: str) -> MalformedReply:
    """The call's failure: its server answered with a task handle mcpd cannot use."""
    logger.warning(
        "%s: tools/call failed: %s", alias, reason, extra=log_extra(alias, "malformed_reply")
    )
    return MalformedReply(reason)
