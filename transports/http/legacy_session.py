"""The housekeeping only a legacy (``Mcp-Session-Id``) session needs.

A 2026-07-28 server is stateless: a dropped connection cancels, and nothing is
left to end. A legacy session is told of a cancellation by a notification, has
the server's own requests answered by POST, and is ended by DELETE. Each of these
is bounded by its caller and never raises: when one fails, the log says so and the
transport carries on.
"""

from __future__ import annotations

import logging

from protocol.jsonrpc import messages as rpc
from protocol.shown.logfields import log_extra

from ..base import ServerRequestHandler
from ..best_effort import send_answer, send_cancel
from ..errors import TransportError
from ..read_pace import ReadPace
from .request import VERSION_HEADER, OutgoingMessage, RequestHeaders, SessionId
from .send import Sender, status_only

logger = logging.getLogger("mcpd.http")


async def post_cancel(
    sender: Sender,
    head: RequestHeaders,
    session: SessionId,
    rid: rpc.Id,
    extra: list[tuple[str, str]],
) -> None:
    # Legacy servers check the version header on every POST of a session.
    version = [(k, v) for k, v in extra if k.lower() == VERSION_HEADER]

    async def post(body: bytes) -> None:
        method = "notifications/cancelled"
        ex = OutgoingMessage(method, None, session.for_message(method))
        await sender.post(b"POST", body, head.post(version, ex), ex, sender.accepted)

    await send_cancel(sender.alias, logger, rid, post)


async def post_answer(
    sender: Sender,
    head: RequestHeaders,
    session: SessionId,
    on_request: ServerRequestHandler | None,
    req: rpc.Request,
    pace: ReadPace,
) -> None:
    """POST the answer to a legacy server's request (``best_effort.send_answer``)."""

    async def post(body: bytes) -> None:
        # The session as it is once the answer is ready, which may take a person.
        what = f"the answer to {req.method}"
        ex = OutgoingMessage(what, None, session.for_message(what))
        await sender.post(b"POST", body, head.post([], ex), ex, sender.accepted)

    await send_answer(sender.alias, logger, on_request, req, post, pace.answered_itself)


async def end_session(sender: Sender, head: RequestHeaders, session: SessionId) -> None:
    alias = sender.alias
    ex = OutgoingMessage("DELETE", None, session.value)
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
