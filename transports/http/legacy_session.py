"""The housekeeping only a legacy (``Mcp-Session-Id``) session needs.

A 2026-07-28 server is stateless: a dropped connection cancels, and nothing is
left to end. A legacy session is told of a cancellation by a notification, has
the server's own requests answered by POST, and is ended by DELETE. Each of these
is bounded by its caller and never raises: when one fails, the log says so and the
transport carries on.
"""

from __future__ import annotations

import logging
from typing import Final

import trio

from protocol import jsonrpc as rpc
from protocol.logfields import log_extra
from protocol.mcp import CancelledParams

from ..base import ServerRequestHandler, answer_server_request
from ..errors import TransportError
from .request import VERSION_HEADER, Exchange, RequestHeaders, SessionId
from .send import Sender, status_only

logger = logging.getLogger("mcpd.http")

# How long a cancellation or an answer to the server may take; neither is worth more.
POST_TIMEOUT: Final = 2.0


async def post_cancel(
    sender: Sender,
    head: RequestHeaders,
    session: SessionId,
    rid: rpc.Id,
    extra: list[tuple[str, str]],
) -> None:
    alias = sender.alias
    # Legacy servers check the version header on every POST of a session.
    version = [(k, v) for k, v in extra if k.lower() == VERSION_HEADER]
    params = CancelledParams(requestId=rid, reason="cancelled by the client")
    body = rpc.encode_notification("notifications/cancelled", params)
    ex = Exchange("notifications/cancelled", None, session.value)
    try:
        await sender.post(b"POST", body, head.post(version, ex), ex, sender.accepted)
    except (TransportError, rpc.RPCError) as exc:
        logger.info(
            "%s: notifications/cancelled for id %s failed: %s",
            alias,
            rid,
            exc,
            extra=log_extra(alias, "cancel_failed", str(exc)),
        )


async def post_answer(
    sender: Sender,
    head: RequestHeaders,
    session: SessionId,
    on_request: ServerRequestHandler | None,
    req: rpc.Request,
) -> None:
    """POST the answer to a legacy server's request (``ping``, or what
    ``on_request`` answers; without it, -32601)."""
    alias = sender.alias
    body = await answer_server_request(alias, on_request, req)
    ex = Exchange(f"the answer to {req.method}", None, session.value)
    failed = "no answer in time"
    with trio.move_on_after(POST_TIMEOUT):
        try:
            await sender.post(b"POST", body, head.post([], ex), ex, sender.accepted)
            return
        except (TransportError, rpc.RPCError) as exc:
            failed = str(exc)
    logger.info(
        "%s: could not answer the server's %s request: %s",
        alias,
        req.method,
        failed,
        extra=log_extra(alias, "server_request_unanswered", failed),
    )


async def end_session(sender: Sender, head: RequestHeaders, session: SessionId) -> None:
    alias = sender.alias
    ex = Exchange("DELETE", None, session.value)
    headers = [(k, v) for k, v in head.post([], ex) if k != b"Content-Type"]
    try:
        status = await sender.post(b"DELETE", b"", headers, ex, status_only)
    except TransportError as exc:
        status, reason = 0, str(exc)
    else:
        reason = f"HTTP {status}"
    session.value = None
    # 404: already gone; 405: the server does not let clients end sessions.
    if 200 <= status < 300 or status in (404, 405):
        logger.debug("%s: session ended (%s)", alias, reason)
    else:
        logger.info(
            "%s: could not end the session: %s",
            alias,
            reason,
            extra=log_extra(alias, "session_delete_failed", reason),
        )
