"""A socket-activated mcpd whose config cannot be loaded keeps systemd's socket and
answers on it, instead of exiting.

Exiting does not stop anything: the connection that started mcpd is still waiting in
the socket's backlog, so systemd starts mcpd again at once, and after a few of those
in a row it gives up on the socket as well (``service-start-limit-hit``), refusing every
agent until someone runs ``systemctl reset-failed``. Holding on keeps the socket alive
and lets every agent and ``mcpd status`` read why nothing is served and what to do. A
reload (SIGHUP, or ``mcpd reload`` as ExecReload= runs it) that finds a config which
loads hands the same listening socket on to the real daemon, without a restart.

Whoever can reach the socket can reach the hold, so it answers within the limits the
agent sockets keep (``agents.entry.places``, the ``[daemon]`` defaults, since the config
that would say otherwise is what cannot be read): so many connections, each let go
when it sends no request within ``first_message_timeout`` or a line past a small
size, and accepting waits a moment when mcpd or the system is out of descriptors, as
``trio.serve_listeners`` does for the daemon. Nothing a client does ends the hold.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import signal
from collections.abc import Callable
from typing import Final

import trio

from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.lines.framing import LineFramer, Oversized
from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra

from ..agents.entry.door import Speaks, refuse_connection, speaks
from ..agents.entry.peers import Peer, is_owner, peer_of
from ..agents.entry.places import Places, Seat
from ..config.tables.model import CONFIG_ERROR, Config, ConfigError, DaemonConfig
from ..local.service.systemd import Notifier, run_watchdog
from ..reloading.outcome import ReloadReport

logger = logging.getLogger("mcpd")

# Nothing an agent sends now is worth more; what the connections buffer is bounded by
# this times the places they may take.
_MAX_LINE: Final = 64 * 1024
# What accepting one more connection may fail with while mcpd or the system is out of
# descriptors or memory for it, and how long to wait before trying again: those
# ``trio.serve_listeners`` waits out (which cannot serve here: it closes the listener
# as it ends, and this one is the daemon's next).
_EXHAUSTED: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_RETRY_ACCEPT: Final = 0.1
# systemd's STATUS= while holding. Every local user can read it (`systemctl status`);
# the error's key and words, which quote the config, are for those mcpd answers and for
# the journal.
STATUS_LINE: Final = "config error (mcpd status and the journal say what)"


class ConfigHold:
    def __init__(
        self,
        path: str,
        error: ConfigError,
        load: Callable[[str], Config],
        notifier: Notifier,
        limits: DaemonConfig | None = None,
    ) -> None:
        """``limits``: the connection limits kept (by default, ``[daemon]``'s)."""
        self.path = path
        self.error = error
        self._load = load
        self._notifier = notifier
        self._config: Config | None = None
        self._loaded = trio.Event()
        self._handed_on = trio.Event()
        self._report: ReloadReport | None = None
        self._busy = trio.Lock()
        self._asking = 0  # reloads not yet answered
        self._answered = trio.Event()
        self._limits = limits or DaemonConfig()
        self._places = Places()
        self._exhausted = Throttle()
        self._silent = Throttle()

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

    def handed_on(self, report: ReloadReport) -> None:
        """The daemon serves the loaded config: answer the reloads that brought it."""
        self._report = report
        self._handed_on.set()

    async def _accept(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in _EXHAUSTED:
                    raise
                held = self._exhausted.admit()
                if held is not None:
                    logger.error(
                        "cannot accept a connection: %s; trying again in %g s%s",
                        exc.strerror,
                        _RETRY_ACCEPT,
                        f" ({held} more such failures since the last such line)" if held else "",
                        extra=log_extra(None, reason="out of descriptors"),
                    )
                await trio.sleep(_RETRY_ACCEPT)
                continue
            nursery.start_soon(self._connection, stream)

    async def _signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGHUP) as signals:
            async for _ in signals:
                with contextlib.suppress(rpc.RPCError):
                    await self._reload()

    async def _reload(self) -> ReloadReport:
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
            peer = peer_of(stream.socket)
            refusal = self._places.refusal(self._limits, peer)
            if refusal is not None:
                await refuse_connection(stream, f"mcpd: {refusal}")
                return
            deadline = trio.current_time() + self._limits.first_message_timeout
            # A peer that hangs up, or resets the connection, ends its own connection.
            with (
                Seat(self._places.held, peer, None, deadline),
                contextlib.suppress(trio.BrokenResourceError),
            ):
                await self._serve(stream, peer, deadline)

    async def _serve(self, stream: trio.SocketStream, peer: Peer | None, deadline: float) -> None:
        """Answer one connection until it ends, or until ``deadline`` passes with no
        request from it."""
        spoken: Speaks | None = None
        with trio.move_on_at(deadline) as waited:
            spoken = await speaks(stream)
        if waited.cancelled_caught:
            await self._let_go(stream, peer, "sent nothing")
            return
        if spoken is None:  # it hung up
            return
        if spoken == "http":
            await self._http(stream)
            return
        framer = LineFramer(max_line=_MAX_LINE)
        while True:
            with trio.move_on_at(deadline) as waited:
                chunk = await stream.receive_some(65536)
            if waited.cancelled_caught:
                await self._let_go(stream, peer, "sent no request")
                return
            if not chunk:
                return
            for line in framer.feed(chunk):
                if isinstance(line, Oversized):
                    await stream.send_all(self._said(None) + b"\n")
                    return
                try:
                    msg = envelope.decode_message(line)
                except rpc.DecodeFailure as exc:
                    await stream.send_all(rpc.encode_error(exc.id, exc.code, exc.message) + b"\n")
                    continue
                if isinstance(msg, rpc.Request):  # notifications and responses get nothing
                    deadline = math.inf  # it asked: it may stay as long as it likes
                    await self._reply(stream, msg, is_owner(peer))

    async def _reply(self, stream: trio.SocketStream, request: rpc.Request, owner: bool) -> None:
        if not self._asking:
            self._answered = trio.Event()
        self._asking += 1
        try:
            await stream.send_all(await self._answer(request, owner) + b"\n")
        finally:
            self._asking -= 1
            if not self._asking:
                self._answered.set()

    async def _let_go(self, stream: trio.SocketStream, peer: Peer | None, what: str) -> None:
        why = (
            f"it {what} within {self._limits.first_message_timeout:g} s of "
            "connecting (daemon.first_message_timeout)"
        )
        held = self._silent.admit()
        if held is not None:
            logger.info(
                "closed a connection from %s: %s%s",
                "an unknown peer" if peer is None else f"pid {peer.pid}, uid {peer.uid}",
                why,
                f" ({held} more since the last such line)" if held else "",
                extra=log_extra(None, reason="silent connection"),
            )
        with trio.move_on_after(1):
            message = f"mcpd: closing this connection: {why}"
            await stream.send_all(rpc.encode_error(None, -32000, message) + b"\n")

    async def _answer(self, msg: rpc.Request, owner: bool) -> bytes:
        if msg.method == "mcpd/reload" and owner:
            try:
                return rpc.encode_result(msg.id, await self._reload())
            except rpc.RPCError as exc:
                return rpc.encode_error(msg.id, exc.code, exc.message, exc.data)
        return self._said(msg.id)

    def _said(self, id: rpc.Id | None) -> bytes:
        # The data marks it as a config error: `mcpd status` exits 78 with the message.
        return rpc.encode_error(id, -32000, self.message(), {CONFIG_ERROR: str(self.error)})

    async def _http(self, stream: trio.SocketStream) -> None:
        body = (self.message() + "\n").encode()
        head = (
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        with trio.move_on_after(1), contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(head + body)
