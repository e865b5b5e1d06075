"""Requests sent without their sender waiting, on a transport that answers each on an
exchange of its own (Streamable HTTP, HTTP+SSE): ``Transport.send`` there.

A request waits in a queue for a worker, a task of the transport's that sends one
request at a time and hands its answer (or why none came) to the request's reply,
once. Workers are started as requests find none free, up to ``workers`` (the
transport's connections: one exchange each), and then serve request after request:
no request costs a task of its own. A request forgotten is dropped from the queue, or
cancelled where it is under way (with its worker, which another replaces), which is
how that transport tells the server; the transport closing under its requests tells
their senders so.

A request may be sent in its sender's context (``keep_context``): then its worker runs
the exchange with the sender's context variables, so what the server sends back on
that exchange (a legacy server's request) is seen as the sender's.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import math
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping

import trio
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply, MessageTooLarge
from protocol.jsonrpc.splice import SplicedCall

from .base import Params, ReplySink
from .errors import ServerCancelled, TransportClosed, TransportError, single_exceptions

# Sends one request and awaits its result: (method, params, headers) -> result.
Requester = Callable[[str, Params | SplicedCall, Mapping[str, str] | None], Awaitable[Raw]]

_FAILURES = (TransportError, rpc.RPCError, ServerCancelled, MessageTooLarge, MalformedReply)


class _Sent:
    """One request on its way: queued, then under way in a worker."""

    __slots__ = ("context", "headers", "key", "method", "params", "reply", "scope")

    def __init__(
        self,
        key: int,
        method: str,
        params: Params | SplicedCall,
        reply: ReplySink,
        headers: Mapping[str, str] | None,
        context: contextvars.Context | None,
    ) -> None:
        self.key = key
        self.method = method
        self.params = params
        self.reply = reply
        self.headers = headers
        self.context = context
        self.scope: trio.CancelScope | None = None  # its worker's, while under way


class Sends:
    """The requests one transport sends for senders that do not wait."""

    def __init__(self, alias: str, request: Requester, workers: float = math.inf) -> None:
        self._alias = alias
        self._request = request
        self._limit = workers
        self._keys = itertools.count(1)
        # Requests queued or under way, by the key ``send`` returned.
        self._sent: dict[int, _Sent] = {}
        self._queue: deque[_Sent] = deque()
        self._free = trio.lowlevel.ParkingLot()  # workers waiting for a request
        self._workers = 0
        # Workers handing an answer over: one takes the next request itself, so a
        # request sent as the answer arrives (the next call let through) wakes no other.
        self._returning = 0
        # Where the workers run: set while the transport is open.
        self.nursery: trio.Nursery | None = None
        # What workers start in: the transport's own context, not that of the sender
        # that happened to start one (a task inherits its spawner's), which every later
        # request in that worker would otherwise run with.
        self._context = contextvars.copy_context()

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
        reply: ReplySink,
        headers: Mapping[str, str] | None,
        keep_context: bool = False,
    ) -> int:
        nursery = self.nursery
        if nursery is None:
            raise TransportClosed(f"{self._alias}: transport closed")
        key = next(self._keys)
        context = contextvars.copy_context() if keep_context else None
        sent = self._sent[key] = _Sent(key, method, params, reply, headers, context)
        self._queue.append(sent)
        if len(self._queue) <= self._returning:
            pass
        elif self._free:
            self._free.unpark()
        elif self._workers < self._limit:
            self._workers += 1
            self._context.run(nursery.start_soon, self._work)
        return key

    def forget(self, key: rpc.Id) -> None:
        sent = self._sent.pop(key, None) if isinstance(key, int) else None
        if sent is None:
            return
        if sent.scope is not None:
            sent.scope.cancel()  # its worker goes with it
        else:
            self._queue.remove(sent)  # never sent: the server knows nothing of it

    async def _work(self) -> None:
        # One scope for the worker's life: forgetting a request under way cancels its
        # worker, which another replaces (a scope per request costs every request).
        scope = trio.CancelScope()
        try:
            with scope:
                # A request forgotten as it was answered leaves the scope cancelled:
                # then no other request is taken into it.
                while not scope.cancel_called:
                    while not self._queue:
                        await self._free.park()
                    await self._exchange(self._queue.popleft(), scope)
        finally:
            self._workers -= 1
            if scope.cancel_called and self.nursery is not None:
                if self._queue:
                    self._workers += 1
                    self._context.run(self.nursery.start_soon, self._work)
            else:
                # The transport is closing (also for a worker whose request was
                # forgotten as it closed: it may be the last): what is queued never goes.
                while self._queue:
                    sent = self._queue.popleft()
                    if self._sent.pop(sent.key, None) is not None:
                        sent.reply(None, TransportClosed(f"{self._alias}: transport closed"))

    async def _exchange(self, sent: _Sent, scope: trio.CancelScope) -> None:
        raw: Raw | None = None
        error: Exception = TransportClosed(f"{self._alias}: connection closed")
        sent.scope = scope
        try:
            try:
                if sent.context is None:
                    raw = await self._request(sent.method, sent.params, sent.headers)
                else:
                    with _in_context(sent.context):
                        raw = await self._request(sent.method, sent.params, sent.headers)
            except _FAILURES as exc:
                error = exc
        finally:
            sent.scope = None
            # Answered, failed, or cut off as the transport closes; never once forgotten.
            if self._sent.pop(sent.key, None) is not None:
                self._returning += 1
                try:
                    if raw is not None:
                        sent.reply(raw, None)
                    else:
                        sent.reply(None, error)
                finally:
                    self._returning -= 1


@contextlib.contextmanager
def _in_context(context: contextvars.Context) -> Iterator[None]:
    """The sender's context variables, set in this task for as long as the block runs."""
    tokens = [(var, var.set(value)) for var, value in context.items()]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)
