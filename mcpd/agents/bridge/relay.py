"""``mcpd bridge``: a stdio MCP server that relays to the daemon's socket.

Hosts that can only spawn commands (desktop apps, editors, SDK stdio clients) get
every aggregated tool through one entry: ``{"command": "mcpd", "args": ["bridge"]}``.
Lines are relayed as they are, in both directions, so both protocol eras pass
through. While the daemon is unreachable, requests get a JSON-RPC error saying so at
once, and the bridge connects again when the daemon is back, setting the host's
legacy session up again (``session``). A request cut off by a closing
connection is answered once, saying it may have run. A daemon whose listen queue is
full is waited for (``dial``), and only a queue that stays full is an error.

With ``--profile NAME`` each connection to the daemon starts with ``mcpd/useProfile``,
answered before anything of the host's is relayed; a profile the daemon does not
have (or will not give this user) turns every request into an error that says so.

Nothing of the host's is relayed to a process that runs as another user than the
bridge's, root or the mcpd service's (``peers.untrusted_daemon``): each request gets an
error that says who answers instead.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Final

import trio

from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.unreadable import id_at_edges
from protocol.lines.framing import DEFAULT_MAX_LINE, LineFramer, Oversized, OversizedEnd

from ...config.tables.model import EX_CONFIG
from ..connection import batches
from ..entry.dial import (
    CONNECT_WAIT,
    STARTING,
    DialError,
    ForeignSocket,
    QueueFull,
    connect_unix,
    no_daemon,
    not_listening,
)
from ..entry.peers import untrusted_daemon
from .ledger import OpenRelays, OwnRequests
from .opening import OpeningRefused, open_connection
from .session import HostSession, list_changes

UNREACHABLE: Final = -32000
# Lines from the daemon are relayed whatever their size: the bridge talks to no process
# but the daemon of its own user, root or the service, which held each line whole to
# write it, and bounds what it reads itself (``max_line_bytes``).
_FROM_DAEMON: Final = 1 << 62
_EXIT_GRACE: Final = 10.0


class Bridge:
    def __init__(
        self,
        socket_path: str,
        stdin: trio.abc.ReceiveStream,
        stdout: trio.abc.SendStream,
        profile: str | None = None,
        connect_wait: float = CONNECT_WAIT,
    ) -> None:
        self.socket_path = socket_path
        self.connect_wait = connect_wait  # for room in the daemon's listen queue
        self.profile = profile
        self.refused: str | None = None  # why the daemon would not give us the profile
        # The daemon answered that there is no such profile (or not for this user): a
        # config error, which the exit status says too once the host is done.
        self.profile_refused = False
        # Why the last process found on the socket was not talked to.
        self.untrusted: str | None = None
        # Why the last connect gave up: the daemon's listen queue stayed full.
        self.busy: str | None = None
        # Why the last connect failed otherwise (no daemon, permissions, no socket).
        self.down: str | None = None
        self.stdin = stdin
        self.stdout = stdout
        self._out_lock = trio.Lock()
        self._conn: trio.SocketStream | None = None
        self._conn_lock = trio.Lock()
        self._connected_before = False
        self._session = HostSession()
        self._unanswered = OpenRelays()
        self._own = OwnRequests()
        self._host_gone = False
        # The longest line the daemon connected to takes: one over it is not relayed.
        self._line_limit = DEFAULT_MAX_LINE

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self._pump_stdin()
            # The host closed stdin: let answers still on their way reach it, then go.
            # A listen stays open until it is ended: the daemon is told to end it.
            with trio.move_on_after(_EXIT_GRACE):
                await self._unanswered.calls_answered.wait()
            await self._end_listens()
            nursery.cancel_scope.cancel()

    async def _end_listens(self) -> None:
        conn = self._conn
        listens = self._unanswered.listens()
        if conn is None or not listens:
            return
        reason = {"reason": "the host closed its end of the bridge"}
        ended = b"".join(
            rpc.encode_notification("notifications/cancelled", {"requestId": rid, **reason}) + b"\n"
            for rid in listens
        )
        with (
            trio.move_on_after(1),
            contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError),
        ):
            await conn.send_all(ended)

    async def write_out(self, data: bytes) -> None:
        async with self._out_lock:
            if self._host_gone:
                return
            try:
                await self.stdout.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                # Nobody reads what the bridge has to say: nothing left for it to do.
                self._host_gone = True
                _say("the host closed the bridge's stdout; stopping")
                self._nursery.cancel_scope.cancel()

    async def _connection(self) -> trio.SocketStream | None:
        async with self._conn_lock:
            if self._conn is not None:
                return self._conn
            try:
                # In a thread: the connect may wait for room in the daemon's queue.
                sock = await trio.to_thread.run_sync(
                    connect_unix, self.socket_path, self.connect_wait
                )
            except ForeignSocket as exc:
                if str(exc) != self.untrusted:
                    _note(f"mcpd: {exc}")
                self.untrusted, self.busy, self.down = str(exc), None, None
                return None
            except (OSError, DialError) as exc:
                self.untrusted = None
                busy = str(exc) if isinstance(exc, QueueFull) else None
                if busy is not None and busy != self.busy:
                    _note(f"mcpd: {busy}")
                self.busy = busy
                down = None if busy is not None else self._unreachable(exc)
                if down is not None and down != self.down:
                    _note(f"mcpd: {down}")
                self.down = down
                return None
            self.busy = self.down = None
            conn = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
            refusal = untrusted_daemon(conn.socket, self.socket_path)
            if refusal is not None:
                await conn.aclose()
                if refusal != self.untrusted:
                    _note(f"mcpd: {refusal}")
                self.untrusted = refusal
                return None
            self.untrusted = None
            framer = LineFramer(_FROM_DAEMON)
            opened = await open_connection(conn, framer, self.profile)
            if isinstance(opened, OpeningRefused):
                await conn.aclose()
                self.refused = opened.why
                if opened.profile:
                    self.profile_refused = True
                    _note(opened.why)
                return None
            self.refused = None
            self._line_limit = opened.line_limit
            # A new daemon connection has no session: the host's legacy one is set up
            # again under the bridge's own ids, the answers kept from the host.
            replay = self._session.replay(self._own, self._unanswered)
            if replay:
                await conn.send_all(replay)
            elif self._connected_before:
                _say(f"connected to mcpd again on {self.socket_path}")
            self._connected_before = True
            self._conn = conn
            self._nursery.start_soon(self._pump_socket, conn, framer, opened.early)
            return conn

    def _unreachable(self, exc: OSError | DialError) -> str:
        if isinstance(exc, DialError):
            return str(exc)
        return no_daemon(self.socket_path, exc) or (
            f"mcpd is not running ({not_listening(self.socket_path, exc)}); start it with "
            f"{STARTING}, then try again"
        )

    async def _pump_socket(
        self,
        conn: trio.SocketStream,
        framer: LineFramer,
        early: Sequence[bytes | Oversized],
    ) -> None:
        try:
            lines = early
            while True:
                if not lines:
                    data = await conn.receive_some(1 << 16)
                    if not data:
                        break
                    lines = framer.feed(data)
                for line in lines:
                    if not isinstance(line, Oversized):
                        await self._from_daemon(line)
                lines = []
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            async with self._conn_lock:
                if self._conn is conn:
                    self._conn = None
                    self._own.forget()
            with trio.CancelScope(shield=True):
                await conn.aclose()
                # Whatever the daemon did not answer on it, the host hears about now.
                for rid in self._unanswered.take_all(conn):
                    await self.write_out(rpc.encode_error(rid, UNREACHABLE, _CUT) + b"\n")

    async def _from_daemon(self, line: bytes) -> None:
        answered = _answered_ids(line)
        if len(answered) == 1:
            method = self._own.answered(answered[0])
            if method == "initialize":
                await self.write_out(list_changes(line, _say))
            if method is not None:
                return
        # Written before it counts as answered: the last answer settled lets a bridge
        # whose stdin closed go, which would cut this write.
        await self.write_out(line + b"\n")
        for rid in answered:
            self._unanswered.take(rid)

    async def _pump_stdin(self) -> None:
        framer = LineFramer(report_end=True)
        head = b""
        while True:
            try:
                data = await self.stdin.receive_some(1 << 16)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:
                return
            for line in framer.feed(data):
                if isinstance(line, OversizedEnd):
                    rid = id_at_edges(head, line.tail)
                    ids = [] if rid is None else [rid]
                    await self._too_long(ids, line.size, line.limit, False)
                elif isinstance(line, Oversized):
                    head = line.prefix
                else:
                    await self._forward(line)

    async def _too_long(self, ids: list[rpc.Id], size: int, limit: int, batch: bool) -> None:
        """A host's line over the limit is not relayed: the daemon would refuse it and
        close the connection, every other request on it unanswered. The request (each
        of a ``batch``'s) is answered under its id."""
        why = f"the request is {size} bytes, over the {limit} byte limit of a line mcpd takes"
        named = (
            f"id {ids[0]!r}" if len(ids) == 1 else f"ids {ids!r}" if ids else "its id unreadable"
        )
        _say(f"{why} ({named})")
        errors = [
            rpc.encode_error(rid, rpc.INVALID_REQUEST, f"{why}; it was not sent") for rid in ids
        ]
        if errors:
            await self.write_out((batches.joined(errors) if batch else errors[0]) + b"\n")

    async def _forward(self, line: bytes) -> None:
        msg: rpc.Message | None
        try:
            msg = envelope.decode_message(line)
        except rpc.DecodeFailure:
            msg = None
        asked = [msg.id] if isinstance(msg, rpc.Request) else _batch_ids(line)
        taken = [rid for rid in asked if rid in self._own]
        if taken:
            message = f"id {taken[0]!r} is in use by the bridge's own request; use another"
            await self._answer_all(msg, asked, message)
            return
        conn = await self._connection()
        if conn is not None and len(line) > self._line_limit:
            batch = not isinstance(msg, rpc.Request)
            await self._too_long(asked, len(line), self._line_limit, batch)
            return
        if conn is not None:
            self._unanswered.add(conn, asked, msg.method if isinstance(msg, rpc.Request) else None)
            try:
                await conn.send_all(line + b"\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                async with self._conn_lock:
                    if self._conn is conn:
                        self._conn = None
                # Those the connection's end has not answered yet are answered here.
                await self._answer_all(msg, [r for r in asked if self._unanswered.take(r)], _CUT)
                return
            if isinstance(msg, rpc.Request):
                self._session.note(msg)
            return
        # No daemon to ask: each request gets an error saying why, a batch's as one
        # array (a host waits for every answer of its batch).
        message = (
            self.untrusted
            or self.busy
            or self.refused
            or self.down
            or f"mcpd is not running (no daemon on {self.socket_path})"
        )
        await self._answer_all(msg, asked, message)

    async def _answer_all(self, msg: rpc.Message | None, ids: list[rpc.Id], message: str) -> None:
        if not ids:
            return
        errors = [rpc.encode_error(rid, UNREACHABLE, message) for rid in ids]
        answer = errors[0] if isinstance(msg, rpc.Request) else batches.joined(errors)
        await self.write_out(answer + b"\n")


_CUT: Final = (
    "mcpd closed the connection before this request was answered (mcpd's log says why); "
    "it may have been carried out all the same: a tool call may have had its effects, so "
    "check before calling it again"
)


def _say(text: str) -> None:
    _note(f"mcpd bridge: {text}")


def _note(text: str) -> None:
    """``text`` on stderr, for whoever reads it: what the host gets is the answer on
    stdout. A stderr nobody reads any more (its reader died) is pointed at /dev/null,
    so that neither the next note nor the interpreter's last flush at exit (whose
    failure would change the exit status) stops the bridge."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # a broken pipe, or a stream closed
        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, sys.stderr.fileno())
            finally:
                os.close(null)


def _messages(line: bytes) -> list[rpc.Message]:
    """The messages of a line: one, or a JSON-RPC batch's; none that cannot be read."""
    try:
        return [envelope.decode_message(line)]
    except rpc.DecodeFailure:
        return batches.messages(line)


def _batch_ids(line: bytes) -> list[rpc.Id]:
    """The ids of a batch's requests (none for a line that is not a batch)."""
    if line.lstrip()[:1] != b"[":
        return []
    return [m.id for m in _messages(line) if isinstance(m, rpc.Request)]


def _answered_ids(line: bytes) -> list[rpc.Id]:
    """The ids a line from the daemon answers: a response's, or a batch's answers'."""
    return [
        m.id
        for m in _messages(line)
        if isinstance(m, rpc.Response | rpc.ErrorResponse) and m.id is not None
    ]


def run_bridge(socket_path: str, profile: str | None = None) -> int:
    async def main() -> Bridge:
        stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
        stdout = trio.lowlevel.FdStream(os.dup(sys.stdout.fileno()))
        bridge = Bridge(socket_path, stdin, stdout, profile)
        await bridge.run()
        return bridge

    return EX_CONFIG if trio.run(main).profile_refused else 0
