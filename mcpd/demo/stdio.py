"""Newline-delimited JSON-RPC over a byte stream pair (stdin/stdout), for a DemoServer.

Every request runs in its own task, so a slow tool never holds up the others.
Their responses and notifications go through one channel to one writer task, which
owns the output: cancelling a request can then never cut a line in half (which
would corrupt everything after it), while shutting the connection down still can
stop a write that a client no longer reading has left hanging. ``initialize`` is
answered before the next line is read, since it decides how the requests behind it
are understood.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.lines.framing import DEFAULT_MAX_LINE, LineFramer, Oversized
from protocol.mcp import core as mcp

if TYPE_CHECKING:
    from .runtime import DemoServer

log = logging.getLogger("mcpd.demo.stdio")

DEFAULT_EOF_GRACE = 5.0
_OUTBOX = 64


async def serve_stdio(
    server: DemoServer,
    receive: trio.abc.ReceiveStream,
    send: trio.abc.SendStream,
    *,
    eof_grace: float = DEFAULT_EOF_GRACE,
    max_line: int = DEFAULT_MAX_LINE,
) -> None:
    """Serve one client until it closes ``receive`` (or stops reading ``send``).

    After end of input the requests still running get ``eof_grace`` seconds to
    finish and answer; then they are cancelled. Subscriptions end at once.
    """
    await _Connection(server, send).run(receive, eof_grace, max_line)


class _Connection:
    def __init__(self, server: DemoServer, send: trio.abc.SendStream) -> None:
        self.server = server
        self.session = server.new_session()
        self._send = send
        self._outbox, self._outgoing = trio.open_memory_channel[bytes](_OUTBOX)
        self._requests: dict[rpc.Id, trio.CancelScope] = {}
        # Work that only ends when the client says so: cancelled at end of input.
        self._open_ended: set[trio.CancelScope] = set()
        self._announcing = False

    async def run(self, receive: trio.abc.ReceiveStream, eof_grace: float, max_line: int) -> None:
        async with trio.open_nursery() as connection:
            connection.start_soon(self._writer, connection.cancel_scope)
            # Closing the outbox once all work is done lets the writer finish and exit.
            async with self._outbox, trio.open_nursery() as work:
                await self._read(receive, work, max_line)
                for scope in self._open_ended:
                    scope.cancel()
                if self._requests:
                    log.info("end of input; %d requests still running", len(self._requests))
                work.cancel_scope.deadline = trio.current_time() + eof_grace

    async def _read(
        self, receive: trio.abc.ReceiveStream, work: trio.Nursery, max_line: int
    ) -> None:
        framer = LineFramer(max_line)
        try:
            while chunk := await receive.receive_some():
                for line in framer.feed(chunk):
                    await self._on_line(work, line)
            for line in framer.flush():
                await self._on_line(work, line)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            log.info("input failed (%r); treating it as end of input", exc)

    async def _writer(self, connection: trio.CancelScope) -> None:
        async for message in self._outgoing:
            try:
                await self._send.send_all(message + b"\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                # Nobody reads our answers any more, so nothing left is worth doing.
                log.info("output closed by the client; stopping")
                connection.cancel()
                return

    async def write(self, message: bytes) -> None:
        """Queue one message; cancelled while waiting, it is not sent at all."""
        await self._outbox.send(message)

    async def _on_line(self, nursery: trio.Nursery, line: bytes | Oversized) -> None:
        if isinstance(line, Oversized):
            log.warning("dropped a line over %d bytes: %r", line.limit, line.prefix[:80])
            message = f"Invalid request: message longer than {line.limit} bytes"
            await self.write(rpc.encode_error(None, rpc.INVALID_REQUEST, message))
            return
        try:
            msg = envelope.decode_message(line)
        except rpc.DecodeFailure as exc:
            log.warning("bad message from client: %s", exc.message)
            await self.write(exc.reply())
            return
        if isinstance(msg, rpc.Request):
            await self._on_request(nursery, msg)
        elif isinstance(msg, rpc.Notification):
            self._on_notification(msg)
        else:
            log.debug("ignoring a response from the client (id %r)", msg.id)

    async def _on_request(self, nursery: trio.Nursery, req: rpc.Request) -> None:
        if req.id in self._requests:
            await self.write(
                rpc.encode_error(req.id, rpc.INVALID_REQUEST, f"Request id {req.id!r} is in use")
            )
            return
        if req.method == "initialize":
            reply = await self.server.handle(self.session, req, self.write)
            await self.write(reply.message)
            if reply.error_code is None and not self._announcing:
                # Legacy clients hear of tool changes without asking.
                self._announcing = True
                await nursery.start(self._announce_changes)
            return
        scope = trio.CancelScope()
        self._requests[req.id] = scope
        if req.method == "subscriptions/listen":
            self._open_ended.add(scope)
        nursery.start_soon(self._run_request, req, scope)

    async def _run_request(self, req: rpc.Request, scope: trio.CancelScope) -> None:
        try:
            with scope:
                reply = await self.server.handle(self.session, req, self.write)
            if scope.cancel_called:
                log.info("request %r (%s) cancelled; not answering", req.id, req.method)
                return
            await self.write(reply.message)
        finally:
            del self._requests[req.id]
            self._open_ended.discard(scope)

    async def _announce_changes(self, *, task_status: trio.TaskStatus[None]) -> None:
        scope = trio.CancelScope()
        self._open_ended.add(scope)
        with scope:
            await self.server.announce_tool_changes(self.write, task_status=task_status)

    def _on_notification(self, msg: rpc.Notification) -> None:
        if msg.method != "notifications/cancelled":
            return
        try:
            params = rpc.decode_as(msg.params, mcp.CancelledParams)
        except rpc.InvalidParams as exc:
            log.warning("bad notifications/cancelled: %s", exc)
            return
        target = params.requestId
        scope = self._requests.get(target) if isinstance(target, (int, str)) else None
        if scope is not None:
            scope.cancel()
