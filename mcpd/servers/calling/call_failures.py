"""What a tools/call that got no result comes to: its server's error, passed on, or an
outage that says why; each counted against the server (its breaker, its latency) or
not, logged where nothing else says it, and ended as the server's reply or not
(``calls.CallEnd``). The scheduler's, for each call it admitted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Final

from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply, MessageTooLarge
from protocol.shown.logfields import log_extra
from transports.errors import SERVER_REPLIES, HttpRPCError, ServerCancelled, TransportError

from ..life.downtime import server_wait
from ..life.standing import Standing
from ..oauth import AuthFailed, LoginRequired
from ..results.rpc_errors import call_error, data_findings
from ..results.taking_apart import data_of
from ..status.outage import Outage, last_line
from .calls import Answered, Call, CallEnd, Outcome, Unanswered

logger = logging.getLogger("mcpd.calls")

_ERROR: Final = "a tools/call error"


def failed(
    r: Standing,
    call: Call,
    error: BaseException | None,
    timed_out: bool,
    now: float,
    elapsed: float,
    forget: Callable[[Call, str], None],
) -> CallEnd:
    """What a call that got no result came to: its server's error, or an outage;
    answered only if the server replied. ``forget``: how its scheduler tells the
    server to drop a call timed out."""
    outcome: Outcome
    if timed_out:
        outcome = _timed_out(r, call, now, elapsed, forget)
    elif isinstance(error, rpc.RPCError | ServerCancelled | MalformedReply | MessageTooLarge):
        outcome = _refused(r, call, error, now, elapsed)
    elif isinstance(error, LoginRequired | AuthFailed):
        outcome = _not_logged_in(r, call, error, elapsed)
    elif isinstance(error, TransportError):
        outcome = _unavailable(r, call, error, elapsed)
    else:
        outcome = Outage(r.alias, "internal", f"internal error: {error!r}", call.sent_at)
    if isinstance(outcome, Outage):
        outcome = outcome.masked(r.guard)
    return Answered(outcome) if isinstance(error, SERVER_REPLIES) else Unanswered(outcome)


def error_reply(
    r: Standing, error: rpc.RPCError
) -> tuple[Raw | None, str, str, Callable[[], Raw | rpc.RPCError]]:
    """A server's error for a call, once what it tells of the server is told (a version
    it does not speak, an era it changed): what of it is taken apart (its data; None:
    nothing), as what, why, and the work that makes the agent's error."""
    if error.code == rpc.UNSUPPORTED_PROTOCOL_VERSION:
        r.version_refused()
    elif isinstance(error, HttpRPCError) and error.http_status in (400, 404):
        # As a server that changed eras refuses each call: the probe shows it.
        r.check_liveness()
    found = data_findings(r.guard, r.alias, error)
    made = partial(call_error, r.guard, r.alias, error, _ERROR, found)
    data = error.data if found is not None and isinstance(error.data, Raw) else None
    return data, data_of(_ERROR), "" if found is None else found.why, made


def _timed_out(
    r: Standing, call: Call, now: float, elapsed: float, forget: Callable[[Call, str], None]
) -> Outcome:
    """A call its server did not answer in time, and the limit that said so."""
    reason = f"no answer within {_seconds(elapsed)} s"
    # Progress extends a call up to its hard limit, which is then what ended it.
    hard = now >= call.limit
    source = "daemon.max_call_time" if hard else r.limits.source(call.original, call.timeout)
    if source is not None:
        reason += f" (the limit {source} sets)"
    # Without this line a call timing out left no trace naming the server.
    logger.warning(
        "%s: tools/call %r got %s",
        r.alias,
        call.original,
        reason,
        extra=log_extra(r.alias, reason=reason),
    )
    r.timed_out(call, elapsed, reason)
    outage = Outage(r.alias, "timeout", reason, call.sent_at)
    forget(call, "timed out")
    return outage


def _refused(
    r: Standing,
    call: Call,
    error: rpc.RPCError | ServerCancelled | MalformedReply | MessageTooLarge,
    now: float,
    elapsed: float,
) -> Outcome:
    """A call its server answered with no result: it is up, whatever it thought of the
    request, and the call failed alone."""
    r.breaker.record_success(now, call.ticket)
    r.stats.record(elapsed, error=True)
    if isinstance(error, rpc.RPCError):
        found = data_findings(r.guard, r.alias, error)
        return call_error(r.guard, r.alias, error, _ERROR, found)
    if isinstance(error, ServerCancelled):
        return Outage(r.alias, "cancelled", str(error), call.sent_at)
    if isinstance(error, MalformedReply):
        # Asked again it would most likely answer as unreadably, and a model told the
        # call timed out would ask again. The transport has logged it.
        return Outage(r.alias, "malformed", error.reason, call.sent_at)
    # Too large: the server goes on serving.
    if r.transport_kind != "stdio":  # the stdio transport says so itself
        logger.warning(
            "%s: tools/call %r failed: %s; the server keeps running",
            r.alias,
            call.original,
            error.reason,
            extra=log_extra(r.alias, "message_too_large", error.reason),
        )
    return Outage(r.alias, "too_large", error.reason, call.sent_at)


def _not_logged_in(
    r: Standing, call: Call, error: LoginRequired | AuthFailed, elapsed: float
) -> Outcome:
    """A call that a login stopped: not the server failing, so neither its breaker nor
    a probe of its liveness counts it."""
    r.stats.record(elapsed, error=True)
    if isinstance(error, LoginRequired):
        # It wants a person to log in, and the runner waits for that.
        return Outage(r.alias, "needs_login", error.reason, call.sent_at)
    # The authorization server failed, not this one.
    logger.warning(
        "%s: tools/call %r failed: %s",
        r.alias,
        call.original,
        error.reason,
        extra=log_extra(r.alias, "token_refresh_failed", error.reason),
    )
    return Outage(r.alias, "auth_failed", error.reason, call.sent_at)


def _unavailable(r: Standing, call: Call, error: TransportError, elapsed: float) -> Outcome:
    """A call its server could not be reached for, or went away during: counted against
    its availability."""
    # A server that said when to come back (429 or 503 with Retry-After) answered:
    # it is there, and asked not to be called before then.
    wait = server_wait(error.retry_after)
    r.availability_failure(elapsed, error.reason, call.ticket, wait)
    if r.transport_kind != "stdio":
        # A stdio failure is logged when the process goes; an HTTP one had no line.
        logger.warning(
            "%s: tools/call %r failed: %s",
            r.alias,
            call.original,
            error.reason,
            extra=log_extra(r.alias, reason=error.reason),
        )
        # No process to watch: probe now, so an endpoint that went away is
        # marked unavailable before the next model turn.
        if wait is None:
            r.check_liveness()
    # A stdio server's detail is its stderr's tail: what a call in flight as it
    # died most needs to say (a traceback's last line), as later calls do.
    # Its lines were joined with line feeds: a carriage return in one is its own.
    said = last_line(error.detail.split("\n")) if r.transport_kind == "stdio" else None
    return r.failed_call(error.reason, call.sent_at, said)


def _seconds(value: float) -> str:
    """A duration for people: 0.5, 1, 12.3 (not 0.501 or 1.3e+02)."""
    return f"{value:.1f}".rstrip("0").rstrip(".")
