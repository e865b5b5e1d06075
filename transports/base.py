"""What every transport offers; what they raise is in ``transports.errors``."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from msgspec import Raw

from protocol import jsonrpc as rpc
from protocol.jsonrpc import (
    METHOD_NOT_FOUND,
    Notification,
    Request,
    encode_error,
    encode_result,
)
from protocol.logfields import log_extra

NotificationHandler = Callable[[Notification], None]
# Answers a request a server sent us (elicitation, sampling, roots): the result to send
# back, or rpc.RPCError for an error answer. The transport never looks inside.
ServerRequestHandler = Callable[[rpc.Request], Awaitable[Any]]


def default_answer(req: Request) -> bytes:
    """The answer to a server's request when nobody else takes it: ``ping`` works
    (servers use it to see that the client is there), anything else is -32601."""
    if req.method == "ping":
        return encode_result(req.id, {})
    return encode_error(req.id, METHOD_NOT_FOUND, f"mcpd does not support {req.method!r}")


class Transport(Protocol):
    alias: str

    async def request(
        self,
        method: str,
        params: Any,
        *,
        headers: Mapping[str, str] | None = None,
        cancellable: bool = True,
    ) -> Raw:
        """Send one request and return its raw ``result``.

        Cancelling the caller abandons the request; the transport tells the server
        (``notifications/cancelled`` or closing the stream) when ``cancellable``.
        """
        ...

    async def notify(
        self, method: str, params: Any, *, headers: Mapping[str, str] | None = None
    ) -> None: ...

    def stderr_tail(self) -> list[str]: ...


logger = logging.getLogger("mcpd.transport")


async def answer_server_request(
    alias: str, handler: ServerRequestHandler | None, req: rpc.Request
) -> bytes:
    """The encoded answer to a server's request: ``ping`` and (without a handler)
    everything else as ``default_answer`` says; otherwise what the handler answers."""
    if req.method == "ping" or handler is None:
        return default_answer(req)
    try:
        result = await handler(req)
    except rpc.RPCError as exc:
        return rpc.encode_error(req.id, exc.code, exc.message, exc.data)
    except Exception:
        logger.exception(
            "%s: answering the server's %s request failed",
            alias,
            req.method,
            extra=log_extra(alias, "server_request_failed"),
        )
        return rpc.encode_error(req.id, rpc.INTERNAL_ERROR, "mcpd failed to answer")
    return rpc.encode_result(req.id, result)
