"""Requests other than tools/call that agents send a server through mcpd:
``prompts/get``, ``resources/read``, ``completion/complete``, the tasks methods,
resource subscriptions.

They are light (a read, a lookup), so they skip the call scheduler's queue, but not
its bounds (``queue_size`` of them under way at a server at once; what an agent's keep
is weighed with its calls waiting for a slot, ``queue_bytes``) nor its rules: a
server that is down answers with its outage at once, a request has a time limit
(pushed out while the server waits for its agent's answer), a failure to reach the
server has it probed, and a JSON-RPC error from a live server is passed on, marked
as the server's, or as mcpd's own where it is about mcpd's request to the server
(``rpc_errors.answer_error``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

import msgspec
import trio
from msgspec import UNSET, Raw

from protocol.http import mcp_headers
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply
from protocol.shown.logfields import log_extra
from transports.errors import ServerCancelled, TransportError

from ..calling.calls import CallRefused, SessionMark, Whose
from ..life.downtime import server_wait
from ..results.rpc_errors import answer_error
from ..status.outage import Outage
from .askback import Asker

if TYPE_CHECKING:
    from ..life.server_parts import ServerParts

logger = logging.getLogger("mcpd.calls")

_ROUND_FIELDS: Final = ("inputResponses", "requestState")


async def send(
    server: ServerParts,
    method: str,
    params: msgspec.Struct,
    *,
    name: str | None = None,
    capabilities: Mapping[str, rpc.Json] | None = None,
    asker: Asker | None = None,
    time_limit: float | None = None,
    whose: Whose | None = None,
    session: SessionMark | None = None,
) -> Raw:
    """Send one request to the runner's server for an agent. ``params`` is a struct
    with a ``meta`` field, which gets the era's ``_meta``. ``whose``: the agent's, whose
    shares its bytes are held against until it ends (None: mcpd's own, not weighed);
    ``session``: the one session it may go to (None: any). Raises CallRefused (with the
    outage), the server's rpc.RPCError, or Unqueued (past a bound on the bytes)."""
    limit = server.config.call_timeout(server.alias) if time_limit is None else time_limit
    scheduler = server.scheduler
    # They skip the queue, not its bound: without one, agents could have thousands
    # under way at a stdio server, and every tools/call would wait behind them.
    most = server.limits.queue_size
    if scheduler.requests >= most:
        reason = f"{scheduler.requests} requests already under way at this server"
        raise CallRefused(Outage(server.alias, "busy", reason))
    # Its params are held until it ends, as a waiting call's are: weighed with them.
    held: contextlib.AbstractContextManager[None] = (
        contextlib.nullcontext()
        if whose is None
        else scheduler.waiting.under_way(whose, server.alias, method, params)
    )
    demand = scheduler.demand  # a lazy server: started for this request, as for a call
    with held:
        scheduler.requests += 1
        try:
            if demand is None:
                return await _send(
                    server, method, params, name, capabilities, asker, limit, session
                )
            demand.begin()
            try:
                return await _send(
                    server, method, params, name, capabilities, asker, limit, session
                )
            finally:
                demand.end()
        finally:
            scheduler.requests -= 1


async def _send(
    server: ServerParts,
    method: str,
    params: msgspec.Struct,
    name: str | None,
    capabilities: Mapping[str, rpc.Json] | None,
    asker: Asker | None,
    limit: float,
    session: SessionMark | None,
) -> Raw:
    start = trio.current_time()
    # A server being started (at startup, or on demand) is waited for, within the limit.
    with trio.move_on_at(start + limit):
        while (server.upstream is None or server.phase != "connected") and server.waits_for_start():
            await server.phase_changed()
    up = server.upstream
    if up is None or not server.available:
        raise CallRefused(server.outage())
    if session is not None and up.mark is not session:
        raise CallRefused(Outage(server.alias, "stopped", "the session it was for has ended"))
    # The params types share their ``_meta`` field by name, not by a base class.
    if "meta" in params.__struct_fields__:
        given = msgspec.structs.asdict(params)["meta"]
        meta = up.meta.of(capabilities, given if isinstance(given, dict) else None)
        params = msgspec.structs.replace(params, meta=meta)
    if up.era != "modern":
        # A legacy server's era has no rounds of input: what would continue one is
        # not sent.
        rounds = {f: UNSET for f in _ROUND_FIELDS if f in params.__struct_fields__}
        if rounds:
            params = msgspec.structs.replace(params, **rounds)
    extra: dict[str, str] | None = None
    if up.http and up.era == "modern" and name is not None and method.startswith("tasks/"):
        extra = {mcp_headers.NAME: mcp_headers.encode_value(name)}
    with trio.CancelScope(deadline=start + limit) as scope:

        def extend(seconds: float) -> None:
            scope.deadline = max(scope.deadline, trio.current_time() + seconds)

        # What the request ended with is turned into what the agent gets outside the
        # asks' scope, which tells the server's replies from failures by their types.
        # What the server answers, a result or an error, is no call's outcome: the
        # breaker is told nothing of it (see its rule).
        try:
            with server.asks.scope(asker if up.era == "legacy" else None, extend, limit):
                return await up.request(method, params, name=name, extra_headers=extra)
        except (rpc.RPCError, ServerCancelled) as exc:
            if isinstance(exc, ServerCancelled):
                raise CallRefused(
                    Outage(server.alias, "failed", str(exc), start).masked(server.guard)
                ) from None
            if isinstance(exc, rpc.RPCError) and exc.code == rpc.UNSUPPORTED_PROTOCOL_VERSION:
                server.version_refused()
            raise answer_error(server.alias, exc) from None
        except MalformedReply as exc:
            raise CallRefused(
                Outage(server.alias, "malformed", exc.reason, start).masked(server.guard)
            ) from None
        except TransportError as exc:
            logger.warning(
                "%s: %s failed: %s",
                server.alias,
                method,
                exc.reason,
                extra=log_extra(server.alias, reason=exc.reason),
            )
            # A server that said when to come back (429 or 503 with Retry-After) is
            # there, and asked not to be asked before then, whatever the method.
            wait = server_wait(exc.retry_after)
            if wait is None:
                server.check_liveness()
            else:
                server.told_to_wait(exc.reason, wait)
            outage = server.failed_call(exc.reason, start, None)
            raise CallRefused(outage.masked(server.guard)) from None
    elapsed = trio.current_time() - start
    reason = f"no answer to {method} within {elapsed:.3g} s"
    server.check_liveness()
    raise CallRefused(Outage(server.alias, "timeout", reason, start))
