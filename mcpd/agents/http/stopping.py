"""The requests to ``/mcp`` being answered now, and how mcpd's stop ends them: each is
answered as a socket connection's requests in flight are (``ending``), a call with a
result saying whether it may have run, any other request with an error, before mcpd
closes its connections. A request that comes once mcpd stops is refused the same way.
A ``subscriptions/listen`` is left to end as every listen does then, with its last word.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio

from protocol.jsonrpc import messages as rpc

from ..connection.ending import STOPPING
from .exchange import Exchange


class Answering:
    def __init__(self) -> None:
        self._now: dict[Exchange, tuple[rpc.Request, trio.CancelScope]] = {}
        self._stopped: dict[Exchange, bytes] = {}
        self._stopping = False
        self._settled: trio.Event | None = None  # set once none is being answered

    @contextmanager
    def held(self, exchange: Exchange, req: rpc.Request, scope: trio.CancelScope) -> Iterator[None]:
        """While ``req`` is answered through ``exchange``, until its answer is written;
        ``scope`` is what cuts it short."""
        self._now[exchange] = (req, scope)
        if self._stopping:
            self._stop(exchange, req, scope, refused=True)
        try:
            yield
        finally:
            del self._now[exchange]
            self._stopped.pop(exchange, None)
            if not self._now and self._settled is not None:
                self._settled.set()

    def answer(self, exchange: Exchange) -> bytes | None:
        """The answer the stop gave the request of ``exchange`` (None: it gave none)."""
        return self._stopped.get(exchange)

    def stopping(self) -> None:
        """mcpd stops: each request being answered is cut short, and its answer says so."""
        self._stopping = True
        for exchange, (req, scope) in list(self._now.items()):
            self._stop(exchange, req, scope, refused=False)

    def _stop(
        self, exchange: Exchange, req: rpc.Request, scope: trio.CancelScope, *, refused: bool
    ) -> None:
        if req.method == "subscriptions/listen":
            return
        if refused:
            self._stopped[exchange] = rpc.encode_error(req.id, -32000, STOPPING)
        else:  # what it was doing until now decides what it is told
            self._stopped[exchange] = exchange.stopped_answer(req.id)
        scope.cancel()

    async def drain(self) -> None:
        """Once the answer of each request cut short is written."""
        if self._now:
            self._settled = trio.Event()
            await self._settled.wait()
