"""The requests a stdio server sends mcpd (elicitation, sampling, roots, ping), and
their answers on its stdin.

Each request that someone must answer runs in a task of its own: the answer may take
a person's time, and the reader must go on meanwhile (the server may be waiting for
it to read something). The server may withdraw such a request with
``notifications/cancelled``; it then gets no answer. At most ``MAX_ANSWERING`` are
answered at once: a request past them is refused at once, with no task, by an error
that names the bound.

Answers are made as fast as the server asks, and wait on its stdin until it reads
them: a server that asks without reading would have mcpd keep every answer. Past the
bound of its stdin's queue an answer is dropped instead (the server asked and did not
listen).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp.core import CancelledParams
from protocol.shown.logfields import log_extra
from protocol.shown.visible import METHOD_SHOWN, quote

from ..base import (
    MAX_ANSWERING,
    OVER_LIMIT,
    ServerRequestHandler,
    answer_server_request,
    default_answer,
)
from ..linewriter import LineWriter

logger = logging.getLogger("mcpd.stdio")

# Puts one encoded line on the server's stdin; rpc.RPCError if mcpd could not encode it.
PutRelay = Callable[[bytes, str], None]


class Relays:
    def __init__(
        self,
        alias: str,
        put: PutRelay,
        closed: trio.Event,
        stdin: LineWriter,
        complain: Callable[[], str | None],
    ) -> None:
        """``stdin`` is read for how much waits for the server (its ``queued`` bytes
        against its ``limit``); ``complain`` rations the warnings (None: stay quiet)."""
        self._alias = alias
        self._put = put
        self._closed = closed
        self._stdin = stdin
        self._complain = complain
        self._scopes: dict[rpc.Id, trio.CancelScope] = {}

    def take(
        self, req: rpc.Request, handler: ServerRequestHandler | None, nursery: trio.Nursery | None
    ) -> None:
        """Answer ``req``: legacy servers may ping us; anything else goes to ``handler``
        (whoever answers for mcpd) in a task in ``nursery``."""
        if req.method != "ping" and handler is not None and nursery is not None:
            if req.id in self._scopes:
                reply = rpc.encode_error(req.id, rpc.INVALID_REQUEST, f"id {req.id!r} is in use")
            elif len(self._scopes) >= MAX_ANSWERING:
                reply = self._refusal(req)
            else:
                self._scopes[req.id] = scope = trio.CancelScope()
                nursery.start_soon(self._relay, req, handler, scope)
                return
        else:
            reply = default_answer(req)
        self._answer(reply, req.method)

    def _refusal(self, req: rpc.Request) -> bytes:
        note = self._complain()
        if note is not None:
            logger.warning(
                "%s: refused its %s request: it asks faster than it is answered "
                "(%d of its requests wait for their answers)%s",
                self._alias,
                quote(req.method, METHOD_SHOWN),
                len(self._scopes),
                note,
                extra=log_extra(self._alias, "server_request_refused"),
            )
        return rpc.encode_error(
            req.id,
            OVER_LIMIT,
            f"mcpd answers at most {MAX_ANSWERING} of a server's requests at a time, and "
            "that many wait for their answers; ask again once they are answered",
        )

    async def _relay(
        self, req: rpc.Request, handler: ServerRequestHandler, scope: trio.CancelScope
    ) -> None:
        try:
            with scope:
                reply = await answer_server_request(self._alias, handler, req)
                if not self._closed.is_set():
                    self._answer(reply, req.method)
        finally:
            self._scopes.pop(req.id, None)

    def _answer(self, reply: bytes, method: str) -> None:
        queued = self._stdin.queued
        if queued <= self._stdin.limit:
            with contextlib.suppress(rpc.RPCError):
                self._put(reply, f"the answer to {method}")
            return
        note = self._complain()
        if note is not None:
            logger.warning(
                "%s: dropped the answer to its %s request: it is not reading its "
                "stdin (%d bytes wait for it)%s",
                self._alias,
                quote(method, METHOD_SHOWN),
                queued,
                note,
                extra=log_extra(self._alias, "stdin_full"),
            )

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
