"""``mcpd bridge``: a stdio MCP server that relays to the daemon's socket.

Hosts that can only spawn commands (desktop apps, editors, SDK stdio clients) get
every aggregated tool through one entry: ``{"command": "mcpd", "args": ["bridge"]}``.
Lines are relayed as they are, in both directions, so both protocol eras pass
through. While the daemon is unreachable, requests get a JSON-RPC error saying so at
once, and the bridge connects again when the daemon is back. A daemon whose listen
queue is full is waited for (``dial``), and only a queue that stays full is an error.

With ``--profile NAME`` each connection to the daemon starts with ``mcpd/useProfile``,
answered before anything of the host's is relayed; a profile the daemon does not
have (or will not give this user) turns every request into an error that says so.

Nothing of the host's is relayed to a process that runs as another user than the
bridge's, root or the mcpd service's (``peers.untrusted_daemon``): each request gets an
error that says who answers instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Final

import msgspec
import trio

from protocol import jsonrpc as rpc
from protocol import mcp
from protocol.framing import LineFramer, Oversized

from ..config.model import EX_CONFIG
from . import batches
from .dial import CONNECT_WAIT, DialError, ForeignSocket, QueueFull, connect_unix
from .peers import untrusted_daemon

UNREACHABLE: Final = -32000
REPLAY_ID: Final = "mcpd-bridge-replay"
PROFILE_ID: Final = "mcpd-bridge-profile"
_EXIT_GRACE: Final = 10.0
_PROFILE_TIMEOUT: Final = 10.0
_INFO: Final = mcp.Implementation(name="mcpd-bridge", version="0")


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
        self.stdin = stdin
        self.stdout = stdout
        self._out_lock = trio.Lock()
        self._conn: trio.SocketStream | None = None
        self._conn_lock = trio.Lock()
        self._init_params: msgspec.Raw | None = None
        # Requests relayed on the current daemon connection and not yet answered.
        self._outstanding: set[rpc.Id] = set()
        self._all_answered = trio.Event()
        self._all_answered.set()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self._pump_stdin()
            # The host closed stdin: let answers still on their way reach it, then go.
            with trio.move_on_after(_EXIT_GRACE):
                await self._all_answered.wait()
            nursery.cancel_scope.cancel()

    async def write_out(self, data: bytes) -> None:
        async with self._out_lock:
            await self.stdout.send_all(data)

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
                    print(f"mcpd: {exc}", file=sys.stderr, flush=True)
                self.untrusted, self.busy = str(exc), None
                return None
            except (OSError, DialError) as exc:
                self.untrusted = None
                busy = str(exc) if isinstance(exc, QueueFull) else None
                if busy is not None and busy != self.busy:
                    print(f"mcpd: {busy}", file=sys.stderr, flush=True)
                self.busy = busy
                return None
            self.busy = None
            conn = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
            refusal = untrusted_daemon(conn.socket, self.socket_path)
            if refusal is not None:
                await conn.aclose()
                if refusal != self.untrusted:
                    print(f"mcpd: {refusal}", file=sys.stderr, flush=True)
                self.untrusted = refusal
                return None
            self.untrusted = None
            framer = LineFramer()
            early: Sequence[bytes | Oversized] = []
            if self.profile is not None:
                early_lines = await self._use_profile(conn, framer)
                if early_lines is None:
                    await conn.aclose()
                    return None
                early = early_lines
            if self._init_params is not None:
                # A new daemon connection has no session: repeat the host's legacy
                # handshake under our own id, and keep the reply from the host.
                await conn.send_all(
                    rpc.encode_request(REPLAY_ID, "initialize", self._init_params)
                    + b"\n"
                    + rpc.encode_notification("notifications/initialized")
                    + b"\n"
                )
            self._conn = conn
            self._nursery.start_soon(self._pump_socket, conn, framer, early)
            return conn

    async def _use_profile(
        self, conn: trio.SocketStream, framer: LineFramer
    ) -> Sequence[bytes | Oversized] | None:
        """Ask for the profile and wait for the answer; the lines that came with it,
        or None (with ``refused`` set) when there is no profile to be had."""
        params = {"profile": self.profile, "_meta": mcp.request_meta(mcp.LATEST_MODERN, {}, _INFO)}
        try:
            await conn.send_all(rpc.encode_request(PROFILE_ID, "mcpd/useProfile", params) + b"\n")
            with trio.fail_after(_PROFILE_TIMEOUT):
                while True:
                    data = await conn.receive_some(1 << 16)
                    if not data:
                        self.refused = "mcpd closed the connection when asked for the profile"
                        return None
                    lines = framer.feed(data)
                    for at, line in enumerate(lines):
                        answered = None if isinstance(line, Oversized) else _reply(line)
                        if isinstance(answered, rpc.ErrorResponse):
                            self.profile_refused = True
                            self.refused = f"mcpd: {answered.error.message}"
                            print(self.refused, file=sys.stderr, flush=True)
                            return None
                        if answered is not None:
                            self.refused = None
                            return lines[at + 1 :]
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
            self.refused = "mcpd did not answer when asked for the profile"
        return None

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
                    if isinstance(line, Oversized):
                        continue
                    answered = _answered_ids(line)
                    if answered == [REPLAY_ID]:
                        continue
                    # Written before it counts as answered: the last answer settled
                    # lets a bridge whose stdin closed go, which would cut this write.
                    await self.write_out(line + b"\n")
                    for rid in answered:
                        self._settle(rid)
                lines = []
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            async with self._conn_lock:
                if self._conn is conn:
                    self._conn = None
            with trio.CancelScope(shield=True):
                await conn.aclose()
                # Whatever the daemon did not answer, the host hears about now.
                for rid in sorted(self._outstanding, key=str):
                    await self.write_out(
                        rpc.encode_error(
                            rid,
                            UNREACHABLE,
                            "mcpd closed the connection before answering (daemon stopped or "
                            "restarted); try again",
                        )
                        + b"\n"
                    )
                self._outstanding.clear()
                self._all_answered.set()

    def _settle(self, rid: rpc.Id | None) -> None:
        if rid is not None:
            self._outstanding.discard(rid)
            if not self._outstanding:
                self._all_answered.set()

    async def _pump_stdin(self) -> None:
        framer = LineFramer()
        while True:
            try:
                data = await self.stdin.receive_some(1 << 16)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:
                return
            for line in framer.feed(data):
                if not isinstance(line, Oversized):
                    await self._forward(line)

    async def _forward(self, line: bytes) -> None:
        msg: rpc.Message | None
        try:
            msg = rpc.decode_message(line)
        except rpc.DecodeFailure:
            msg = None
        conn = await self._connection()
        if conn is not None:
            try:
                asked = [msg.id] if isinstance(msg, rpc.Request) else _batch_ids(line)
                if asked:
                    self._outstanding.update(asked)
                    self._all_answered = trio.Event()
                await conn.send_all(line + b"\n")
                if isinstance(msg, rpc.Request) and msg.method == "initialize":
                    self._init_params = msg.params
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                async with self._conn_lock:
                    self._conn = None
        # No daemon to ask: each request gets an error saying why, a batch's as one
        # array (a host waits for every answer of its batch).
        asked = [msg.id] if isinstance(msg, rpc.Request) else _batch_ids(line)
        if not asked:
            return
        message = (
            self.untrusted
            or self.busy
            or self.refused
            or (
                f"mcpd is not running (no daemon on {self.socket_path}); start it with "
                "`mcpd serve` or `systemctl start mcpd`, then try again"
            )
        )
        errors = [rpc.encode_error(rid, UNREACHABLE, message) for rid in asked]
        answer = errors[0] if isinstance(msg, rpc.Request) else batches.joined(errors)
        await self.write_out(answer + b"\n")
        for rid in asked:
            self._settle(rid)


def _reply(line: bytes) -> rpc.Response | rpc.ErrorResponse | None:
    """The daemon's answer to the profile request, if ``line`` is it."""
    try:
        msg = rpc.decode_message(line)
    except rpc.DecodeFailure:
        return None
    if isinstance(msg, rpc.Response | rpc.ErrorResponse) and msg.id == PROFILE_ID:
        return msg
    return None


def _messages(line: bytes) -> list[rpc.Message]:
    """The messages of a line: one, or a JSON-RPC batch's; none that cannot be read."""
    try:
        return [rpc.decode_message(line)]
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
