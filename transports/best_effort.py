"""What a transport that POSTs its messages sends on its own account: word that a
request was given up on, and the answer to a request of the server's.

Both HTTP transports send these, HTTP+SSE always and Streamable HTTP in a legacy
session: each hands over ``post``, its way to POST one message. Neither is worth
failing anything for, so neither raises: when one does not get through, the log (the
transport's own) says so and the transport carries on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp.core import CancelledParams
from protocol.shown.logfields import log_extra

from .base import ServerRequestHandler, answer_server_request
from .errors import TransportError

# POSTs one encoded message, raising what kept the server from taking it.
Post = Callable[[bytes], Awaitable[None]]

# How long a cancellation or an answer to the server may take; neither is worth more.
POST_TIMEOUT: Final = 2.0


async def send_cancel(alias: str, log: logging.Logger, rid: rpc.Id, post: Post) -> None:
    """Tell the server that request ``rid`` was given up on (bounded by the caller)."""
    params = CancelledParams(requestId=rid, reason="cancelled by the client")
    try:
        await post(rpc.encode_notification("notifications/cancelled", params))
    except (TransportError, rpc.RPCError) as exc:
        log.info(
            "%s: notifications/cancelled for id %s failed: %s",
            alias,
            rid,
            exc,
            extra=log_extra(alias, "cancel_failed", str(exc)),
        )


async def send_answer(
    alias: str,
    log: logging.Logger,
    on_request: ServerRequestHandler | None,
    req: rpc.Request,
    post: Post,
    answered_itself: Callable[[], None],
) -> bool:
    """POST the answer to the server's ``req`` (``ping``, or what ``on_request``
    answers; without it, -32601) within ``POST_TIMEOUT``: whether the server took it.
    ``answered_itself`` hears of an answer mcpd made without an agent (``ping``, or a
    refusal): one an agent gave is paced by the agent."""
    relayed = False

    async def relay(asked: rpc.Request) -> object:
        nonlocal relayed
        assert on_request is not None
        result = await on_request(asked)
        relayed = True
        return result

    body = await answer_server_request(alias, relay if on_request else None, req)
    if not relayed:
        answered_itself()
    failed = "no answer in time"
    with trio.move_on_after(POST_TIMEOUT):
        try:
            await post(body)
            return True
        except (TransportError, rpc.RPCError) as exc:
            failed = str(exc)
    log.info(
        "%s: could not answer the server's %s request: %s",
        alias,
        req.method,
        failed,
        extra=log_extra(alias, "server_request_unanswered", failed),
    )
    return False
