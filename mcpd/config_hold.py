"""A socket-activated mcpd whose config cannot be loaded keeps systemd's socket and
answers on it, instead of exiting.

Exiting does not stop anything: the connection that started mcpd is still waiting in
the socket's backlog, so systemd starts mcpd again at once, and after a few of those
in a row it gives up on the socket as well (``service-start-limit-hit``), refusing every
agent until someone runs ``systemctl reset-failed``. Holding on keeps the socket alive
and lets every agent and ``mcpd status`` read why nothing is served and what to do. A
reload (SIGHUP, or ``mcpd reload`` as ExecReload= runs it) that finds a config which
loads hands the same listening socket on to the real daemon, without a restart.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Callable
from typing import Any, Final

import trio

from protocol import jsonrpc as rpc
from protocol.framing import LineFramer, Oversized
from protocol.logfields import log_extra

from .agents.door import speaks
from .agents.peers import is_owner, peer_of
from .config.model import CONFIG_ERROR, Config, ConfigError
from .local.systemd import Notifier, run_watchdog

logger = logging.getLogger("mcpd")

_MAX_LINE: Final = 1 << 20  # nothing an agent sends now is worth more
# systemd's STATUS= while holding. Every local user can read it (`systemctl status`);
# the error's key and words, which quote the config, are for those mcpd answers and for
# the journal.
STATUS_LINE: Final = "config error (mcpd status and the journal say what)"


class ConfigHold:
    def __init__(
        self, path: str, error: ConfigError, load: Callable[[str], Config], notifier: Notifier
    ) -> None:
        self.path = path
        self.error = error
        self._load = load
        self._notifier = notifier
        self._config: Config | None = None
        self._loaded = trio.Event()
        self._handed_on = trio.Event()
        self._report: dict[str, Any] | None = None
        self._busy = trio.Lock()
        self._asking = 0  # reloads not yet answered
        self._answered = trio.Event()

    def message(self) -> str:
        return (
            f"mcpd is not serving: its config {self.path} has an error: {self.error}. "
            "Fix the file, then reload mcpd (`systemctl reload mcpd`, or SIGHUP); "
            "no restart is needed"
        )

    async def run(
        self,
        listener: trio.SocketListener,
        task_status: trio.TaskStatus[Config] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Answer on ``listener`` until a config loads; then report it (``started``)
        and keep only the reloads that asked for it open until ``handed_on``. The
        listener is left open for the daemon."""
        logger.warning(
            "holding the socket %s and answering agents with the config error until a "
            "reload finds a config that loads",
            listener.socket.getsockname(),
            extra=log_extra(None),
        )
        self._notifier.ready(STATUS_LINE)
        async with trio.open_nursery() as connections:
            async with trio.open_nursery() as front:
                front.start_soon(run_watchdog, self._notifier)
                front.start_soon(self._signals)
                front.start_soon(self._accept, listener, connections)
                await self._loaded.wait()
                front.cancel_scope.cancel()
            assert self._config is not None
            task_status.started(self._config)
            await self._handed_on.wait()
            with trio.move_on_after(5):  # a reload that cannot take its answer: no more
                while self._asking:
                    await self._answered.wait()
            connections.cancel_scope.cancel()

    def handed_on(self, report: dict[str, Any]) -> None:
        """The daemon serves the loaded config: answer the reloads that brought it."""
        self._report = report
        self._handed_on.set()

    async def _accept(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            stream = await listener.accept()
            nursery.start_soon(self._connection, stream)

    async def _signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGHUP) as signals:
            async for _ in signals:
                with contextlib.suppress(rpc.RPCError):
                    await self._reload()

    async def _reload(self) -> dict[str, Any]:
        async with self._busy:
            if not self._loaded.is_set():
                self._notifier.reloading()
                try:
                    self._config = self._load(self.path)
                except ConfigError as exc:
                    self.error = exc
                    logger.error(
                        "reload rejected, still not serving: config error: %s",
                        exc,
                        extra=log_extra(None, "reload", str(exc)),
                    )
                    self._notifier.ready(STATUS_LINE)
                    raise rpc.RPCError(
                        -32000, f"config rejected: {exc}", {CONFIG_ERROR: str(exc)}
                    ) from None
                logger.info("the config loads now; starting to serve", extra=log_extra(None))
                self._loaded.set()
        await self._handed_on.wait()
        assert self._report is not None
        return self._report

    async def _connection(self, stream: trio.SocketStream) -> None:
        async with stream:
            if await speaks(stream) == "http":
                await self._http(stream)
                return
            peer = peer_of(stream.socket)
            framer = LineFramer(max_line=_MAX_LINE)
            while chunk := await stream.receive_some(65536):
                for line in framer.feed(chunk):
                    if isinstance(line, Oversized):
                        return
                    if not self._asking:
                        self._answered = trio.Event()
                    self._asking += 1
                    try:
                        reply = await self._answer(line, is_owner(peer))
                        if reply is not None:
                            await stream.send_all(reply + b"\n")
                    finally:
                        self._asking -= 1
                        if not self._asking:
                            self._answered.set()

    async def _answer(self, line: bytes, owner: bool) -> bytes | None:
        try:
            msg = rpc.decode_message(line)
        except rpc.DecodeFailure as exc:
            return rpc.encode_error(exc.id, exc.code, exc.message)
        if not isinstance(msg, rpc.Request):
            return None  # notifications and stray responses need no answer
        if msg.method == "mcpd/reload" and owner:
            try:
                return rpc.encode_result(msg.id, await self._reload())
            except rpc.RPCError as exc:
                return rpc.encode_error(msg.id, exc.code, exc.message, exc.data)
        # The data marks it as a config error: `mcpd status` exits 78 with the message.
        return rpc.encode_error(msg.id, -32000, self.message(), {CONFIG_ERROR: str(self.error)})

    async def _http(self, stream: trio.SocketStream) -> None:
        body = (self.message() + "\n").encode()
        head = (
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        with trio.move_on_after(1), contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(head + body)
