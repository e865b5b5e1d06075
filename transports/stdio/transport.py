"""A stdio MCP server: a child process in its own process group, spoken to in lines.

Responses are routed to waiting requests by id. When the process exits or its stdout
closes, every pending request fails at once with the exit status and the last lines
of stderr. Stopping closes stdin, waits, then SIGTERMs and SIGKILLs the whole group,
so helpers a server spawned (``npx`` -> ``node``) go with it, and then the descendants
that left the group (``process.strays``).
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Callable, Mapping
from functools import partial
from typing import Final

import trio
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.splice import SplicedCall
from protocol.lines.oneline import line_fault
from protocol.lines.stdout import StdoutReader

from .. import chunks
from ..base import AuthHook, NotificationHandler, Params, ReplySink, Started, Transport
from ..chunks import BATCH
from ..complaints import Complaints
from ..errors import TransportClosed, TransportError, single_exceptions
from ..linewriter import LineWriter
from ..pending import PendingRequests
from ..read_pace import ReadPace
from .call_lines import CallLines, checked_line
from .loopback.relay import relay_loopback
from .params import StdioParams, child_environment
from .process.child import ChildProcess, signal_group
from .process.exits import exit_reason
from .process.lifecycle import ending, start, stop_leftovers, stop_process
from .process.stderr import StderrLog, read_stderr
from .server_requests import Relays

__all__ = ["StdioTransport", "open_stdio_transport"]

logger = logging.getLogger("mcpd.stdio")

_EXIT_DRAIN: Final = 0.5  # after exit, how long buffered stdout may still be read
_MAX_BUFFERED: Final = 16 * 1024 * 1024  # bytes queued for a server's stdin
_CANCEL_NOTIFY_TIMEOUT: Final = 1.0
_READ_SIZE: Final = 65536


class StdioTransport(Transport):
    def __init__(
        self,
        alias: str,
        process: ChildProcess,
        params: StdioParams,
        on_notification: NotificationHandler | None,
        on_stderr: Callable[[str], None] | None,
    ) -> None:
        super().__init__(alias)
        self.process = process
        self.params = params
        self.auth: AuthHook | None = None  # a child has no channel for credentials
        self._nursery: trio.Nursery | None = None
        self._ids = rpc.IdAllocator()
        # One budget for the warnings about what the server does at will, whatever it is.
        self.complaints = complaints = Complaints()
        self._pending = PendingRequests(alias, logger, complaints.admit, self._answered_late)
        stdin = process.stdin
        assert stdin is not None
        self._writer = LineWriter(stdin, stdin.fileno(), _MAX_BUFFERED, line_fault)
        self._calls = CallLines(self._writer, self._call_failed)
        self._stderr = StderrLog(alias, params.stderr_tail, on_stderr)
        self._stdout_eof = trio.Event()
        self._stderr_eof = trio.Event()
        self._exited = trio.Event()
        # Set as the owner stops the server: stdin is closed under the writer then.
        self._stopping = False
        self._relays = Relays(alias, self._put, self.closed, self._writer, complaints.admit)
        self._pace: ReadPace = ReadPace(alias, params.max_line, params.read_budget)
        self._reader = StdoutReader(
            alias,
            params.max_line,
            self._pending,
            complaints.admit,
            on_notification,
            self._server_request,
            self._relays.withdrawn,
        )

    @property
    def pid(self) -> int:
        """The server's own process (in its sandbox, if it has one)."""
        return self.process.command_pid()

    @property
    def started(self) -> Started:
        p = self.process
        return Started(p.pid, p.token, p.unprotected, p.covered)

    def stderr_tail(self) -> list[str]:
        return list(self._stderr.tail)

    async def request(
        self,
        method: str,
        params: Params,
        *,
        headers: Mapping[str, str] | None = None,
        cancellable: bool = True,
    ) -> Raw:
        if self.error is not None:
            raise self.error
        rid = self._ids.next()
        slot = self._pending.wait(rid)
        event = slot.event
        try:
            await self._send(rpc.encode_request(rid, method, params))
            await event.wait()
        except trio.Cancelled:
            self._pending.abandon(rid)
            if cancellable and not slot.done and self.error is None:
                with trio.move_on_after(_CANCEL_NOTIFY_TIMEOUT, shield=True):
                    await self._send_quietly(
                        rpc.encode_notification(
                            "notifications/cancelled",
                            {"requestId": rid, "reason": "cancelled by the client"},
                        )
                    )
            raise
        finally:
            self._pending.drop(rid)
        if slot.error is not None:
            raise slot.error
        assert slot.result is not None
        return slot.result

    def send(
        self,
        method: str,
        params: Params | SplicedCall,
        reply: ReplySink,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> rpc.Id:
        if self.error is not None:
            raise self.error
        rid = self._ids.next()
        # Past the bound, the line is made when there is room for it (``CallLines``).
        now = not self._calls.waiting and self._writer.has_room
        if type(params) is SplicedCall:
            # One line of JSON by the way it is built: it needs no check.
            if now:
                self._calls.queue(rid, params.shape.request(rid, params.arguments, params.token))
            else:
                self._calls.wait(
                    rid, partial(params.shape.request, rid, params.arguments, params.token)
                )
        elif now:
            self._calls.queue(rid, self._request_line(rid, method, params))
        else:
            self._calls.wait(rid, partial(self._request_line, rid, method, params))
        self._pending.expect(rid, reply)
        return rid

    def forget(self, rid: rpc.Id, reason: str) -> None:
        if not self._pending.forget(rid):
            return
        if self._calls.take_back(rid):
            return  # none of it reached the server: there is nothing to cancel
        if self.error is None:
            with contextlib.suppress(rpc.RPCError):
                self._put(
                    rpc.encode_notification(
                        "notifications/cancelled", {"requestId": rid, "reason": reason}
                    ),
                    "notifications/cancelled",
                )

    def _request_line(self, rid: rpc.Id, method: str, params: Params) -> bytes:
        return checked_line(self.alias, rpc.encode_request(rid, method, params), method)

    def _call_failed(self, rid: rpc.Id, error: rpc.RPCError) -> None:
        self._pending.resolve(rid, None, error)

    async def notify(
        self, method: str, params: Params, *, headers: Mapping[str, str] | None = None
    ) -> None:
        if self.error is not None:
            raise self.error
        await self._send(rpc.encode_notification(method, params))

    async def _send(self, data: bytes) -> None:
        if self.error is not None:
            raise self.error
        # A server that stops reading its stdin must not make mcpd buffer without bound.
        await self._writer.wait_room()
        if self.error is not None:
            raise self.error
        self._put(data, "a message")

    def _put(self, line: bytes, what: str) -> None:
        self._writer.put_spliced(checked_line(self.alias, line, what))

    async def _write_stdin(self) -> None:
        try:
            await self._writer.run()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            if self._stopping:
                return  # closed by the stop, which tells the waiting requests why
            # The exit watcher usually knows why (exit status); give it a moment.
            with trio.move_on_after(_EXIT_DRAIN):
                await self.closed.wait()
            self._close(self._error(f"could not be written to ({exc})"))
        finally:
            self._writer.close()

    async def _send_quietly(self, data: bytes) -> None:
        with contextlib.suppress(TransportError):
            await self._send(data)

    # -- background tasks, all inside open_stdio_transport's nursery --

    async def _read_stdout(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        fd = stdout.fileno()
        drained = False
        try:
            with self._pace.stream() as paced:
                while True:
                    await paced.before_read()
                    data = await chunks.receive(fd, _READ_SIZE, wait_first=drained)
                    if not data:
                        break
                    paced.came()
                    drained = len(data) < _READ_SIZE
                    with BATCH:  # answers to a chunk of responses go out together
                        paced.read(self._reader.feed(data))
                    del data  # not kept while the server is quiet: up to _READ_SIZE per server
            self._reader.flush()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        self._stdout_eof.set()
        with trio.move_on_after(_EXIT_DRAIN):
            await self._exited.wait()
        if self._exited.is_set():
            await self._close_on_exit()
        else:
            self._close(self._error("closed its stdout but is still running"))

    async def _read_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        try:
            with self._pace.stream() as paced:
                await read_stderr(stderr, self._stderr, paced)
        finally:
            self._stderr_eof.set()

    async def _watch_exit(self) -> None:
        await self.process.wait()
        self._exited.set()
        # Responses written just before exit may still sit in the pipe.
        with trio.move_on_after(_EXIT_DRAIN):
            await self._stdout_eof.wait()
        await self._close_on_exit()

    async def _close_on_exit(self) -> None:
        # What a dying server last wrote on stderr (its traceback) may not have been
        # read yet as its exit is seen; the requests it leaves waiting quote it.
        with trio.move_on_after(_EXIT_DRAIN):
            await self._stderr_eof.wait()
        self._close(self._exit_error())

    def _server_request(self, req: rpc.Request) -> None:
        # Read at each request: the owner sets on_request after the reader exists.
        self._relays.take(req, self.on_request, self._nursery)

    def _error(self, what: str) -> TransportClosed:
        return TransportClosed(f"{self.alias} {what}", detail="\n".join(self._stderr.tail))

    def _exit_error(self) -> TransportClosed:
        proc = self.process
        limits = proc.sandbox.limits if proc.sandbox is not None else None
        reason = exit_reason(
            proc.returncode,
            limits,
            self._stderr.tail,
            sandboxed=proc.wrapped,
            ending=ending(proc),
        )
        return self._error(reason)

    def _close(self, error: TransportError) -> None:
        if self.error is not None:
            return
        self.error = error
        self._calls.clear()
        self._pending.fail_all(error)
        self.closed.set()


@contextlib.asynccontextmanager
async def open_stdio_transport(
    alias: str,
    params: StdioParams,
    *,
    on_notification: NotificationHandler | None = None,
    on_stderr: Callable[[str], None] | None = None,
    base_env: Mapping[str, str] | None = None,
) -> AsyncIterator[StdioTransport]:
    """Spawn the server; on exit stop it and everything in its process group."""
    process = start(
        alias,
        [params.command, *params.args],
        child_environment(params, base_env),
        params.cwd,
        params.sandbox,
    )
    transport = StdioTransport(alias, process, params, on_notification, on_stderr)
    try:
        with single_exceptions():
            async with trio.open_nursery() as nursery:
                transport._nursery = nursery
                nursery.start_soon(transport._read_stdout)
                nursery.start_soon(transport._read_stderr)
                nursery.start_soon(transport._watch_exit)
                nursery.start_soon(transport._write_stdin)
                if process.host_loopback is not None:
                    nursery.start_soon(
                        relay_loopback,
                        alias,
                        process.host_loopback.listeners,
                        transport.complaints,
                    )
                try:
                    yield transport
                except TransportError as exc:
                    # The owner ends the session for a reason of its own (a probe got
                    # no answer): that is what the requests still waiting are told,
                    # not what closing the pipes of a stuck server then looks like.
                    transport._close(exc)
                    raise
                finally:
                    transport._stopping = True
                    transport._writer.close()  # nothing is written once stdin is closed
                    with trio.CancelScope(shield=True):
                        await stop_process(
                            process,
                            alias,
                            stdin_grace=params.stdin_grace,
                            term_grace=params.term_grace,
                        )
                        transport._close(transport._exit_error())
                        await stop_leftovers(process, alias, params.term_grace)
                    nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            # Only reached if the shielded stop itself failed.
            signal_group(process.pid, signal.SIGKILL)
        # Left to the garbage collector, the pipes of every stopped server stayed open
        # for a while (two descriptors per restart); the readers are done with them.
        # Closed synchronously: an await here would be cancelled along with the caller.
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        if process.host_loopback is not None:
            process.host_loopback.close()
