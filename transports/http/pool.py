"""The keep-alive connections a transport holds to its one origin.

A connection goes back to the pool only when h11 says both sides finished the
exchange; anything else (cancelled mid-response, a stream abandoned after its answer,
``Connection: close``) closes it. The pool is sized by the server's ``max_concurrency``,
as many connections as calls may be under way at once.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator

import trio

from protocol.http.parts import Origin

from ..errors import TransportClosed
from .connection import HttpConnection
from .dial import connect

__all__ = ["ConnectionPool"]


class ConnectionPool:
    """At most ``size`` connections to one origin; callers beyond that wait in line.

    Idle connections are reused newest first and dropped after ``keepalive_expiry``
    seconds, a little under the common server keep-alive timeouts, so a request
    rarely meets a connection the server is closing at that very moment.
    """

    def __init__(
        self,
        origin: Origin,
        label: str,
        *,
        size: int,
        ssl_context: ssl.SSLContext | None,
        connect_timeout: float,
        read_timeout: float | None,
        keepalive_expiry: float = 4.0,
        tcp_keepalive: float | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("pool_size must be at least 1")
        self.origin = origin
        self._label = label
        self._slots = trio.Semaphore(size)
        self._idle: list[HttpConnection] = []
        self._ssl_context = ssl_context
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._keepalive_expiry = keepalive_expiry
        self._tcp_keepalive = tcp_keepalive
        self._closed = False

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[HttpConnection]:
        conn = await self.acquire()
        try:
            yield conn
        finally:
            await self.release(conn)

    async def acquire(self) -> HttpConnection:
        """A connection for one exchange (an idle one, or a new one): ``release`` it
        after, whatever happened."""
        slots = self._slots
        try:
            # A free slot is taken at once: the exchange's own I/O lets others run.
            slots.acquire_nowait()
        except trio.WouldBlock:
            await slots.acquire()
        try:
            conn = await self._take_idle() if self._idle else None
            if conn is None:
                if self._closed:
                    raise TransportClosed(f"{self._label}: transport closed")
                conn = await connect(
                    self.origin,
                    self._label,
                    ssl_context=self._ssl_context,
                    connect_timeout=self._connect_timeout,
                    read_timeout=self._read_timeout,
                    tcp_keepalive=self._tcp_keepalive,
                )
        except BaseException:
            slots.release()
            raise
        return conn

    async def release(self, conn: HttpConnection) -> None:
        """Back to the idle ones if the exchange finished cleanly, else closed."""
        try:
            if not self._closed and conn.recycle():
                conn.idle_since = trio.current_time()
                self._idle.append(conn)
            else:
                await conn.aclose()
        finally:
            self._slots.release()

    async def _take_idle(self) -> HttpConnection | None:
        now = trio.current_time()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < self._keepalive_expiry and conn.looks_alive():
                return conn
            await conn.aclose()
        return None

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.aclose()
