"""The requests a stdio server sends mcpd (elicitation, sampling, roots, ping), and
their answers on its stdin.

Each request that someone must answer runs in a task of its own: the answer may take
a person's time, and the reader must go on meanwhile (the server may be waiting for
it to read something). The server may withdraw such a request with
``notifications/cancelled``; it then gets no answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import trio

from protocol import jsonrpc as rpc
from protocol.mcp import CancelledParams

from ..base import ServerRequestHandler, answer_server_request, default_answer

# Puts one encoded line on the server's stdin; rpc.RPCError if mcpd could not encode it.
Put = Callable[[bytes, str], None]


class Relays:
    def __init__(self, alias: str, put: Put, closed: trio.Event) -> None:
        self._alias = alias
        self._put = put
        self._closed = closed
        self._scopes: dict[rpc.Id, trio.CancelScope] = {}

    def take(
        self, req: rpc.Request, handler: ServerRequestHandler | None, nursery: trio.Nursery | None
    ) -> None:
        """Answer ``req``: legacy servers may ping us; anything else goes to ``handler``
        (whoever answers for mcpd) in a task in ``nursery``."""
        if req.method != "ping" and handler is not None and nursery is not None:
            if req.id in self._scopes:
                reply = rpc.encode_error(req.id, rpc.INVALID_REQUEST, f"id {req.id!r} is in use")
            else:
                self._scopes[req.id] = scope = trio.CancelScope()
                nursery.start_soon(self._relay, req, handler, scope)
                return
        else:
            reply = default_answer(req)
        with contextlib.suppress(rpc.RPCError):
            self._put(reply, f"the answer to {req.method}")

    async def _relay(
        self, req: rpc.Request, handler: ServerRequestHandler, scope: trio.CancelScope
    ) -> None:
        try:
            with scope:
                reply = await answer_server_request(self._alias, handler, req)
                if not self._closed.is_set():
                    with contextlib.suppress(rpc.RPCError):
                        self._put(reply, f"the answer to {req.method}")
        finally:
            self._scopes.pop(req.id, None)

    def withdrawn(self, msg: rpc.Notification) -> bool:
        """Whether ``msg`` (notifications/cancelled) withdrew a request being relayed;
        if so its relay stops and the server is answered nothing."""
        try:
            params = rpc.decode_as(msg.params, CancelledParams)
        except rpc.InvalidParams:
            return False
        scope = self._scopes.pop(params.requestId, None)  # type: ignore[arg-type]
        if scope is None:
            return False
        scope.cancel()
        return True
