"""Requests sent without their sender waiting, on a transport that answers each on an
exchange of its own (Streamable HTTP, HTTP+SSE): ``Transport.send`` there.

Each such request waits for its answer in a task of the transport's own, which hands
the answer (or why none came) to the request's reply, once. A request forgotten is
cancelled where it waits, which is how that transport tells the server; the transport
closing under its requests tells their senders so.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import trio
from msgspec import Raw

from protocol import jsonrpc as rpc
from protocol.splice import SplicedCall

from .base import Params, Reply
from .errors import (
    MalformedReply,
    MessageTooLarge,
    ServerCancelled,
    TransportClosed,
    TransportError,
    single_exceptions,
)

# Sends one request and awaits its result: (method, params, headers) -> result.
Request = Callable[[str, Params | SplicedCall, Mapping[str, str] | None], Awaitable[Raw]]


class Sends:
    """The requests one transport sends for senders that do not wait."""

    def __init__(self, alias: str, request: Request) -> None:
        self._alias = alias
        self._request = request
        self._keys = itertools.count(1)
        # Requests waiting, by the key ``send`` returned: what cancels each.
        self._waiting: dict[int, trio.CancelScope] = {}
        # Where they wait: set while the transport is open.
        self.nursery: trio.Nursery | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Where the requests wait while the transport is open (for a transport with
        no nursery of its own); what still waits as it closes is told so."""
        with single_exceptions():
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                try:
                    yield
                finally:
                    self.nursery = None
                    nursery.cancel_scope.cancel()

    def send(
        self,
        method: str,
        params: Params | SplicedCall,
        reply: Reply,
        headers: Mapping[str, str] | None,
    ) -> int:
        if self.nursery is None:
            raise TransportClosed(f"{self._alias}: transport closed")
        key = next(self._keys)
        self._waiting[key] = trio.CancelScope()
        self.nursery.start_soon(self._wait, key, method, params, reply, headers)
        return key

    def forget(self, key: rpc.Id) -> None:
        scope = self._waiting.pop(key, None) if isinstance(key, int) else None
        if scope is not None:
            scope.cancel()

    async def _wait(
        self,
        key: int,
        method: str,
        params: Params | SplicedCall,
        reply: Reply,
        headers: Mapping[str, str] | None,
    ) -> None:
        scope = self._waiting.get(key)
        if scope is None:
            return  # forgotten before it was sent
        raw: Raw | None = None
        error: Exception = TransportClosed(f"{self._alias}: connection closed")
        try:
            with scope:
                try:
                    raw = await self._request(method, params, headers)
                except (
                    TransportError,
                    rpc.RPCError,
                    ServerCancelled,
                    MessageTooLarge,
                    MalformedReply,
                ) as exc:
                    error = exc
        finally:
            # Answered, failed, or cut off as the transport closes; never once forgotten.
            if self._waiting.pop(key, None) is not None:
                if raw is not None:
                    reply(raw, None)
                else:
                    reply(None, error)
