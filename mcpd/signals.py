"""What a signal asks of the daemon: SIGHUP a reload, SIGTERM and SIGINT a stop.

Signals are heard from the daemon's first moment to its last and never wait on what
they ask for, so a SIGTERM is read during a reload. The reloads SIGHUP asks for run
one at a time, from once the start is done (the start is still putting sockets and
servers in place before); the SIGHUPs that come during one are one more reload after
it."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable

import trio

from protocol.jsonrpc import messages as rpc

from .reloading.reread import reload_fault

__all__ = ["Signals"]


class Signals:
    def __init__(self, reload: Callable[[], Awaitable[object]], stop: Callable[[], None]) -> None:
        self._reload = reload
        self._stop = stop
        self._reload_asked = trio.Event()  # by a SIGHUP not yet acted on

    async def hear(self) -> None:
        with trio.open_signal_receiver(signal.SIGHUP, signal.SIGTERM, signal.SIGINT) as sigs:
            async for signum in sigs:
                if signum == signal.SIGHUP:
                    self._reload_asked.set()
                else:
                    self._stop()

    async def reloads(self, started: trio.Event) -> None:
        """The reloads asked for, once ``started`` is set."""
        await started.wait()
        while True:
            await self._reload_asked.wait()
            self._reload_asked = trio.Event()
            await self._reload_quietly()

    async def _reload_quietly(self) -> None:
        """A signal's reload: a refused one is said in the log, which is all it has; one
        that fails on what nothing expected ends that reload, not the daemon."""
        try:
            await self._reload()
        except rpc.RPCError:
            pass
        except Exception as exc:
            reload_fault(exc)
