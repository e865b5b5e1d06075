"""Setting up again a legacy Streamable HTTP session the server forgot.

The server forgot the session before it handled the request that found it gone, so
that request may be sent again in a new one without running twice. Every request
that finds it gone (a 404 to its session, or refused before it was sent while no
session is set up: ``transports.http.request.SessionId``) waits for the same
handshake, begun by the first in the session's nursery, so that no one request's
deadline or cancel ends it for the others; each waits within its own deadline. A
server that comes back speaking 2026-07-28 alone is greeted in that era instead, and
keeps no session to lose (``handshake.Handshake.initialize``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from protocol.jsonrpc import messages as rpc
from protocol.shown.logfields import log_extra
from transports.base import Transport
from transports.errors import SessionExpired, TransportError

logger = logging.getLogger("mcpd.upstream")


class SessionRenewal:
    def __init__(
        self,
        alias: str,
        transport: Transport,
        initialize: Callable[[], Awaitable[None]],
        timeout: float,
    ) -> None:
        """``initialize``: the handshake, until ``notifications/initialized`` is sent;
        ``timeout`` bounds it."""
        self.alias = alias
        self.timeout = timeout
        self._transport = transport
        self._initialize = initialize
        self._under_way: trio.Event | None = None  # set when the handshake ends
        self._failed = ""  # why the last one set no session up

    async def wait(self, nursery: trio.Nursery | None) -> None:
        """Return once a session the server knows is set up (at once if one was set up
        since the lost one); SessionExpired, saying why, if the handshake failed.
        Without a nursery the handshake runs in the caller's task."""
        if not self._transport.session_lost:
            return
        under_way = self._under_way
        if under_way is None:
            under_way = self._under_way = trio.Event()
            if nursery is None:
                await self._begin(under_way)
            else:
                nursery.start_soon(self._begin, under_way)
        await under_way.wait()
        if self._transport.session_lost:
            raise SessionExpired(
                f"{self.alias}: the server no longer knows our session, and setting up a "
                f"new one failed: {self._failed}"
            )

    async def _begin(self, done: trio.Event) -> None:
        logger.info(
            "%s: session expired, initializing again", self.alias, extra=log_extra(self.alias)
        )
        failed = "the handshake was given up"
        try:
            with trio.fail_after(self.timeout):
                await self._initialize()
        except trio.TooSlowError:
            failed = f"no answer to initialize within {self.timeout:g} s"
        except (TransportError, rpc.RPCError) as exc:
            failed = str(exc)
        finally:
            self._failed = failed
            self._under_way = None
            done.set()
