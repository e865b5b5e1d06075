"""``GET /mcp``: a legacy session's own event stream, for what answers no request.

A client of the 2025-era Streamable HTTP transport (2025-03-26 to 2025-11-25) opens it
right after ``notifications/initialized`` and gets there what its counterpart on the
socket gets unsolicited: the list changes of tools, prompts and resources, and the
updates of the resources it subscribed to. What a server asks the agent during a call
still comes on that call's own response stream, next to the request it belongs to.

``SessionNews`` is the session as the broadcasters reach an agent (an ``Audience``).
Its queue is the session's, not the stream's: news that comes while no stream is open
(between ``initialize`` and the GET, or while the client reconnects) waits there, so
none is lost in between; one stream at a time reads it. The queue is bounded in
messages and in bytes, the bytes as a slow agent's replies are on the socket: what does
not fit is dropped, and a client that stops reading for ``WRITE_TIMEOUT`` loses its
stream (not its session).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Final

import trio

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import AgentSession
from protocol.shown.logfields import log_extra

from ..agent import Audience
from ..connection.outbox import QUEUE_BYTES
from ..profiles import Profile
from .wire import Wire, WireResponse, end_when_set

logger = logging.getLogger("mcpd.http")

QUEUE: Final = 256  # messages waiting for one session's stream; more are dropped
# A comment this often keeps a quiet stream open: clients drop one that says nothing for
# long (Node's fetch after 300 s, an httpx client after its read timeout, often 30 s).
KEEPALIVE: Final = 15.0
# As on the socket: a client that takes nothing for this long has stopped reading.
WRITE_TIMEOUT: Final = 30.0
_END_GRACE: Final = 1.0


class SessionNews(Audience):
    """A legacy HTTP session, where the list changes and resource updates for its agent
    go; its GET stream writes them out."""

    def __init__(self, session: AgentSession, profile: Profile) -> None:
        self.session = session
        self.profile = profile
        self.subscriptions: set[rpc.Id] = set()  # a listen's; a legacy session has none
        self.seen_version = profile.version
        self.dropped = 0
        self.sid = ""  # its Mcp-Session-Id, for the log
        self.streaming = False  # a GET stream is reading the queue
        self.closed = False
        self._queue: deque[bytes] = deque()
        # What the queue holds, to find the same news waiting without a pass over it.
        self._waiting: set[bytes] = set()
        self.queued = 0  # the bytes of the messages in the queue
        self._arrived = trio.Event()

    @property
    def label(self) -> str:
        info = self.session.client_info
        name = info.name if isinstance(info, mcp.Implementation) else None
        who = f"HTTP client {name!r}" if isinstance(name, str) else "HTTP client"
        return f"{who} (session {self.sid[:8]})"

    def send_nowait(self, data: bytes, rid: rpc.Id | None = None) -> None:
        if self.closed or data in self._waiting:
            return  # the same news still waiting to go out says nothing new
        queue = self._queue
        # In bytes too, as on the socket (one message alone always fits): a session no
        # stream reads, whose server logs large messages, holds no more than that.
        if len(queue) >= QUEUE or (queue and self.queued + len(data) > QUEUE_BYTES):
            self.dropped += 1
            if self.dropped == 1 and self.streaming:
                logger.warning(
                    "%s is not reading its event stream; dropping what does not fit "
                    "(%d messages of %d bytes wait)",
                    self.label,
                    len(queue),
                    self.queued,
                    extra=log_extra(None, reason="peer not reading"),
                )
            return
        self._hold(data)
        queue.append(data)
        self._arrived.set()

    def _hold(self, data: bytes) -> None:
        self._waiting.add(data)
        self.queued += len(data)

    async def next(self) -> bytes | None:
        """The next message to write, or None once the session has ended."""
        while not self._queue:
            if self.closed:
                return None
            self._arrived = trio.Event()
            await self._arrived.wait()
        data = self._queue.popleft()
        self._waiting.discard(data)
        self.queued -= len(data)
        return data

    def put_back(self, data: bytes) -> None:
        """A message whose write was cut short goes first to the next stream (unless
        the same came again meanwhile, and waits already)."""
        if not self.closed and data not in self._waiting:
            self._hold(data)
            self._queue.appendleft(data)

    def close(self) -> None:
        """The session ended: its stream ends, and nothing more is queued."""
        self.closed = True
        self._queue.clear()
        self._waiting.clear()
        self.queued = 0
        self._arrived.set()


async def serve_stream(
    wire: Wire, news: SessionNews, allowed: Callable[[], bool], ends: trio.Event | None = None
) -> None:
    """Write ``news`` as an event stream until the session ends, the client hangs up or
    stops reading, ``allowed`` (asked before each write) says no, or ``ends`` is set
    (its connection is to close); the caller made sure no other stream reads it."""
    response = WireResponse(wire)
    news.streaming = True
    try:
        # The head at once: a client waits for it before it reads anything.
        with trio.move_on_after(WRITE_TIMEOUT):
            await response.open_stream()
        if wire.broken:
            return
        async with trio.open_nursery() as nursery:

            async def end_on_hangup() -> None:
                await wire.wait_gone()
                nursery.cancel_scope.cancel()

            nursery.start_soon(end_on_hangup)
            if ends is not None:
                nursery.start_soon(end_when_set, ends, nursery.cancel_scope)
            try:
                await _pump(response, news, allowed)
            except trio.TooSlowError:
                logger.warning(
                    "%s stopped reading its event stream for %.0f s; closing the stream",
                    news.label,
                    WRITE_TIMEOUT,
                    extra=log_extra(None, reason="peer not reading"),
                )
            nursery.cancel_scope.cancel()
    finally:
        news.streaming = False
        if not wire.broken:
            # Ended by us (the session's end, the daemon stopping, a socket closed by a
            # reload): the last chunk tells the client the stream ended, not broke.
            with trio.move_on_after(_END_GRACE, shield=True):
                await response.finish(None, 200)


async def _pump(response: WireResponse, news: SessionNews, allowed: Callable[[], bool]) -> None:
    wire = response.wire
    while not wire.broken:
        message: bytes | None = None
        with trio.move_on_after(KEEPALIVE) as idle:
            message = await news.next()
        if message is None and not idle.cancelled_caught:
            return  # the session ended
        # Before each write, not only at a keep-alive: a stream that news keeps busy
        # would otherwise outlive its credentials for as long as the news comes.
        if not allowed():
            if message is not None:
                news.put_back(message)
            logger.info(
                "%s: its event stream ends, its credentials no longer pass",
                news.label,
                extra=log_extra(None),
            )
            return
        with trio.fail_after(WRITE_TIMEOUT):
            if message is None:
                await response.comment(b"keep-alive")
            else:
                await response.event(message)
        if wire.broken and message is not None:
            news.put_back(message)
