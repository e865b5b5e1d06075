"""A stdio MCP server: a child process in its own process group, spoken to in lines.

Responses are routed to waiting requests by id. When the process exits or its stdout
closes, every pending request fails at once with the exit status and the last lines
of stderr. Stopping closes stdin, waits, then SIGTERMs and SIGKILLs the whole group,
so helpers a server spawned (``npx`` -> ``node``) go with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final

import msgspec
import trio
from msgspec import Raw, UnsetType

from protocol import jsonrpc as rpc
from protocol.framing import DEFAULT_MAX_LINE, LineFramer, Oversized
from protocol.logfields import log_extra
from protocol.mcp import CancelledParams

from .base import (
    NotificationHandler,
    ServerCancelled,
    SpawnError,
    TransportClosed,
    TransportError,
    single_exceptions,
)
from .linewriter import LineWriter, batch
from .process import ChildProcess, signal_group, spawn

logger = logging.getLogger("mcpd.stdio")

# Variables systemd hands to the main process only (plus mcpd's own test-fault switches).
# A child that inherited them could send READY=1 or WATCHDOG=1 on mcpd's behalf, believe
# it owns mcpd's listening sockets, or think its stderr is a journal stream when it is
# really a pipe into mcpd.
PARENT_ONLY_VARS: Final = frozenset(
    {
        "NOTIFY_SOCKET",
        "WATCHDOG_USEC",
        "WATCHDOG_PID",
        "LISTEN_FDS",
        "LISTEN_PID",
        "LISTEN_FDNAMES",
        "JOURNAL_STREAM",
        "SYSTEMD_EXEC_PID",
        "FDSTORE",
        "MEMORY_PRESSURE_WATCH",
        "MEMORY_PRESSURE_WRITE",
        "TRIGGER_UNIT",
        "TRIGGER_PATH",
        "TRIGGER_TIMER_REALTIME_USEC",
        "TRIGGER_TIMER_MONOTONIC_USEC",
        "MAINPID",
        "MCPD_TEST_FAULTS",
        "MCPD_TEST_WEDGE_SECONDS",
    }
)

_EXIT_DRAIN: Final = 0.5  # after exit, how long buffered stdout may still be read
_MAX_BUFFERED: Final = 16 * 1024 * 1024  # bytes queued for a server's stdin
_CANCEL_NOTIFY_TIMEOUT: Final = 1.0
_ABANDONED_KEPT: Final = 1024  # ids of given-up requests whose late answers are expected
# Warnings about what one server writes on stdout: a burst, then one a second.
_COMPLAINT_BURST: Final = 20
_COMPLAINT_RATE: Final = 1.0
_STDERR_MAX_LINE: Final = 4096
# Enough of an oversized line's start to find which request it answered.
_ID_AT_START: Final = re.compile(
    rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")'
)


class StdioParams(msgspec.Struct, frozen=True):
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    cwd: str | None = None
    inherit_env: bool = True
    max_line: int = DEFAULT_MAX_LINE
    stdin_grace: float = 2.0
    term_grace: float = 3.0
    stderr_tail: int = 20


def child_environment(params: StdioParams, base: Mapping[str, str] | None = None) -> dict[str, str]:
    source = os.environ if base is None else base
    env = (
        {k: v for k, v in source.items() if k not in PARENT_ONLY_VARS} if params.inherit_env else {}
    )
    if params.env:
        env.update(params.env)
    return env


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "is still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


Reply = Callable[[Raw | None, Exception | None], None]


class _Slot:
    """A request awaiting its response: woken by an event, or answered by a callback."""

    __slots__ = ("callback", "done", "error", "event", "result")

    def __init__(self, callback: Reply | None = None) -> None:
        self.callback = callback
        self.event = trio.Event() if callback is None else None
        self.done = False
        self.result: Raw | None = None
        self.error: Exception | None = None

    def resolve(self, result: Raw | None, error: Exception | None) -> None:
        self.done = True
        self.result, self.error = result, error
        if self.callback is not None:
            self.callback(result, error)
        else:
            assert self.event is not None
            self.event.set()


class _Complaints:
    """A token bucket for warnings about one server's stdout.

    Each line that is not JSON-RPC used to be a warning of its own: a server writing
    nonsense at full speed turned mcpd's event loop into a log writer, and every other
    server waited. Past the burst, lines are counted and the next warning says how many.
    """

    __slots__ = ("_stamp", "_tokens", "suppressed")

    def __init__(self) -> None:
        self._tokens = float(_COMPLAINT_BURST)
        self._stamp = trio.current_time()
        self.suppressed = 0

    def admit(self) -> str | None:
        """None: stay quiet. Otherwise a note for the end of the warning."""
        now = trio.current_time()
        self._tokens = min(
            float(_COMPLAINT_BURST), self._tokens + (now - self._stamp) * _COMPLAINT_RATE
        )
        self._stamp = now
        if self._tokens < 1:
            self.suppressed += 1
            return None
        self._tokens -= 1
        note = f" ({self.suppressed} more like this not logged)" if self.suppressed else ""
        self.suppressed = 0
        return note


class StdioTransport:
    def __init__(
        self,
        alias: str,
        process: ChildProcess,
        params: StdioParams,
        on_notification: NotificationHandler | None,
        on_stderr: Callable[[str], None] | None,
    ) -> None:
        self.alias = alias
        self.process = process
        self.params = params
        self._on_notification = on_notification
        self._on_stderr = on_stderr
        self._ids = rpc.IdAllocator()
        self._pending: dict[rpc.Id, _Slot] = {}
        # Requests given up on (timed out or cancelled): an answer may still come for them
        # and is dropped quietly. Any other unmatched response is the server's mistake.
        self._abandoned: dict[rpc.Id, None] = {}
        self._complaints = _Complaints()
        self._framer = LineFramer(params.max_line)
        stdin = process.stdin
        assert stdin is not None
        self._writer = LineWriter(stdin, stdin.fileno(), _MAX_BUFFERED, rpc.line_fault)
        self._tail: deque[str] = deque(maxlen=params.stderr_tail)
        self._stdout_eof = trio.Event()
        self._exited = trio.Event()
        self.closed = trio.Event()
        self.error: TransportError | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def stderr_tail(self) -> list[str]:
        return list(self._tail)

    async def request(
        self,
        method: str,
        params: Any,
        *,
        headers: Mapping[str, str] | None = None,
        cancellable: bool = True,
    ) -> Raw:
        if self.error is not None:
            raise self.error
        rid = self._ids.next()
        slot = _Slot()
        event = slot.event
        assert event is not None
        self._pending[rid] = slot
        try:
            await self._send(rpc.encode_request(rid, method, params))
            await event.wait()
        except trio.Cancelled:
            self._abandon(rid)
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
            del self._pending[rid]
        if slot.error is not None:
            raise slot.error
        assert slot.result is not None
        return slot.result

    def _abandon(self, rid: rpc.Id) -> None:
        self._abandoned[rid] = None
        if len(self._abandoned) > _ABANDONED_KEPT:
            del self._abandoned[next(iter(self._abandoned))]

    def request_nowait(self, method: str, params: Any, reply: Reply) -> rpc.Id:
        """Send a request without waiting; ``reply`` gets (result, None) or (None, error)
        from the reader task, once. Raises the transport's error if it is closed."""
        if self.error is not None:
            raise self.error
        rid = self._ids.next()
        line = rpc.encode_request(rid, method, params)
        self._put(line, method)
        self._pending[rid] = _Slot(reply)
        return rid

    def forget(self, rid: rpc.Id, reason: str) -> None:
        """Give up on a request sent with ``request_nowait``: the server is told, and a
        late answer is dropped."""
        if self._pending.pop(rid, None) is not None and self.error is None:
            self._abandon(rid)
            with contextlib.suppress(rpc.RPCError):
                self._put(
                    rpc.encode_notification(
                        "notifications/cancelled", {"requestId": rid, "reason": reason}
                    ),
                    "notifications/cancelled",
                )

    async def notify(
        self, method: str, params: Any, *, headers: Mapping[str, str] | None = None
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
        fault = self._writer.put(line)
        if fault is None:
            return
        # A bug in mcpd, not in the server: the child must never get a broken line.
        logger.error(
            "%s: did not send %s to the server: %s (a fault in mcpd)",
            self.alias,
            what,
            fault,
            extra=log_extra(self.alias, "broken_line", fault),
        )
        raise rpc.RPCError(
            rpc.INTERNAL_ERROR, f"mcpd could not send {what} to {self.alias}: {fault}"
        )

    async def _write_stdin(self) -> None:
        try:
            await self._writer.run()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
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
        try:
            while True:
                data = await stdout.receive_some(65536)
                if not data:
                    break
                with batch():  # answers to a chunk of responses go out together
                    for item in self._framer.feed(data):
                        self._dispatch(item)
            for item in self._framer.flush():
                self._dispatch(item)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        self._stdout_eof.set()
        with trio.move_on_after(_EXIT_DRAIN):
            await self._exited.wait()
        if self._exited.is_set():
            self._close(self._exit_error())
        else:
            self._close(self._error("closed its stdout but is still running"))

    async def _read_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        framer = LineFramer(_STDERR_MAX_LINE)
        try:
            while True:
                data = await stderr.receive_some(65536)
                if not data:
                    break
                for item in framer.feed(data):
                    self._stderr_line(item)
            for item in framer.flush():
                self._stderr_line(item)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass

    async def _watch_exit(self) -> None:
        await self.process.wait()
        self._exited.set()
        # Responses written just before exit may still sit in the pipe.
        with trio.move_on_after(_EXIT_DRAIN):
            await self._stdout_eof.wait()
        self._close(self._exit_error())

    def _dispatch(self, item: bytes | Oversized) -> None:
        if isinstance(item, Oversized):
            self._oversized(item)
            return
        try:
            msg = rpc.decode_message(item)
        except rpc.DecodeFailure as exc:
            note = self._complaints.admit()
            if note is not None:
                logger.warning(
                    "%s: skipped a stdout line that is not JSON-RPC (%s): %.200r%s",
                    self.alias,
                    exc.message,
                    item,
                    note,
                    extra=log_extra(self.alias),
                )
            return
        if isinstance(msg, rpc.Response | rpc.ErrorResponse):
            slot = self._pending.get(msg.id) if msg.id is not None else None
            if slot is None or slot.done:
                self._unmatched(msg)
                return
            if slot.callback is not None:
                del self._pending[msg.id]  # type: ignore[arg-type]
            if isinstance(msg, rpc.Response):
                slot.resolve(msg.result, None)
            else:
                slot.resolve(None, rpc.RPCError.from_object(msg.error))
        elif isinstance(msg, rpc.Notification):
            if msg.method == "notifications/cancelled" and self._server_cancelled(msg):
                return
            if self._on_notification is not None:
                try:
                    self._on_notification(msg)
                except Exception:
                    logger.exception("%s: notification handler failed", self.alias)
        else:
            self._server_request(msg)

    def _server_cancelled(self, msg: rpc.Notification) -> bool:
        try:
            params = rpc.decode_as(msg.params, CancelledParams)
        except rpc.InvalidParams:
            return False
        if isinstance(params.requestId, UnsetType):
            return False
        slot = self._pending.get(params.requestId)
        if slot is None or slot.done:
            return False
        reason = params.reason if isinstance(params.reason, str) else "no reason given"
        if slot.callback is not None:
            del self._pending[params.requestId]
        slot.resolve(None, ServerCancelled(f"{self.alias} cancelled the request: {reason}"))
        return True

    def _unmatched(self, msg: rpc.Response | rpc.ErrorResponse) -> None:
        if msg.id is not None and msg.id in self._abandoned:
            del self._abandoned[msg.id]  # a second one is not late but a duplicate
            logger.debug("%s: dropped a late response for id %r", self.alias, msg.id)
            return
        # Unknown ids, duplicates, an id of the wrong type ("3" for 3): used to be
        # debug-level only, so the log never said which server sent them.
        note = self._complaints.admit()
        if note is None:
            return
        said = f" ({msg.error.message})" if isinstance(msg, rpc.ErrorResponse) else ""
        reason = "response to no pending request"
        logger.warning(
            "%s: dropped a response for id %r%s: no request with that id is waiting "
            "(unknown id, wrong id type, or a duplicate)%s",
            self.alias,
            msg.id,
            said,
            note,
            extra=log_extra(self.alias, reason=reason),
        )

    def _server_request(self, req: rpc.Request) -> None:
        # Legacy servers may ping us; mcpd offers no other client-side features.
        if req.method == "ping":
            reply = rpc.encode_result(req.id, {})
        else:
            reply = rpc.encode_error(
                req.id, rpc.METHOD_NOT_FOUND, f"mcpd does not support {req.method!r}"
            )
        with contextlib.suppress(rpc.RPCError):
            self._put(reply, f"the answer to {req.method}")

    def _oversized(self, item: Oversized) -> None:
        m = _ID_AT_START.match(item.prefix)
        slot = None
        if m is not None:
            rid: rpc.Id = msgspec.json.decode(m.group(1))
            slot = self._pending.get(rid)
        reason = f"{self.alias}: a message exceeded the {item.limit} byte line limit"
        if slot is not None and not slot.done:
            if slot.callback is not None:
                del self._pending[rid]
            slot.resolve(None, TransportError(reason))
        logger.warning("%s and was dropped", reason, extra=log_extra(self.alias, reason=reason))

    def _stderr_line(self, item: bytes | Oversized) -> None:
        raw = item.prefix + b"..." if isinstance(item, Oversized) else item
        line = raw.decode("utf-8", "replace").rstrip()
        self._tail.append(line)
        if self._on_stderr is not None:
            self._on_stderr(line)
        else:
            logger.info("%s", line, extra=log_extra(self.alias, "stderr"))

    def _error(self, what: str) -> TransportClosed:
        return TransportClosed(f"{self.alias} {what}", detail="\n".join(self._tail))

    def _exit_error(self) -> TransportClosed:
        return self._error(describe_exit(self.process.returncode))

    def _close(self, error: TransportError) -> None:
        if self.error is not None:
            return
        self.error = error
        for rid, slot in list(self._pending.items()):
            if slot.callback is not None:
                del self._pending[rid]
            if not slot.done:
                slot.resolve(None, error)
        self.closed.set()

    async def _stop(self) -> None:
        """Close stdin, wait, SIGTERM the group, wait, SIGKILL the group."""
        proc = self.process
        with contextlib.suppress(Exception):
            await proc.stdin.aclose()  # type: ignore[union-attr]
        with trio.move_on_after(self.params.stdin_grace):
            await proc.wait()
        if proc.returncode is None:
            signal_group(proc.pid, signal.SIGTERM)
            with trio.move_on_after(self.params.term_grace):
                await proc.wait()
        if proc.returncode is None:
            logger.warning(
                "%s: still running %g s after SIGTERM; sending SIGKILL to its process group",
                self.alias,
                self.params.term_grace,
                extra=log_extra(self.alias, reason="ignored SIGTERM"),
            )
        # Also after a clean exit: whatever the server left in its group goes too.
        signal_group(proc.pid, signal.SIGKILL)
        with trio.move_on_after(self.params.term_grace):
            await proc.wait()
        self._close(self._exit_error())


def start(params: StdioParams, alias: str, base_env: Mapping[str, str] | None) -> ChildProcess:
    argv: Sequence[str] = [params.command, *params.args]
    try:
        return spawn(argv, env=child_environment(params, base_env), cwd=params.cwd)
    except OSError as exc:
        raise _spawn_error(alias, params, exc) from None


def _spawn_error(alias: str, params: StdioParams, exc: OSError) -> SpawnError:
    what = f"{alias}: cannot start {params.command!r}"
    if isinstance(exc, FileNotFoundError):
        if params.cwd and not os.path.isdir(params.cwd):
            return SpawnError(f"{what}: working directory {params.cwd!r} not found")
        return SpawnError(f"{what}: command not found")
    if isinstance(exc, PermissionError):
        return SpawnError(f"{what}: permission denied (not executable?)")
    return SpawnError(f"{what}: {exc.strerror or exc}")


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
    process = start(params, alias, base_env)
    transport = StdioTransport(alias, process, params, on_notification, on_stderr)
    try:
        with single_exceptions():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(transport._read_stdout)
                nursery.start_soon(transport._read_stderr)
                nursery.start_soon(transport._watch_exit)
                nursery.start_soon(transport._write_stdin)
                try:
                    yield transport
                finally:
                    with trio.CancelScope(shield=True):
                        await transport._stop()
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
