"""An agent for tests: speaks MCP to the daemon's socket in either era, many requests
in flight, replies matched by id."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from mcpd.daemon import Daemon
from transports.errors import single_exceptions

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test-agent", "version": "0"},
}


class Agent:
    def __init__(self, stream: trio.SocketStream, modern: bool = True) -> None:
        self.stream = stream
        self.modern = modern
        self._ids = itertools.count(1)
        self._waiting: dict[Any, trio.MemorySendChannel[dict[str, Any]]] = {}
        self.notifications: list[dict[str, Any]] = []
        self.notified = trio.Event()
        self.unmatched: list[dict[str, Any]] = []
        self._unmatched_event = trio.Event()
        self.closed = trio.Event()
        self._buf = b""
        self._send_lock = trio.Lock()
        # The reply lines asked for as they came (``rpc_text``), by request id.
        self._texts: dict[Any, bytes | None] = {}

    async def reader(self) -> None:
        try:
            while True:
                data = await self.stream.receive_some(1 << 16)
                if not data:
                    break
                self._buf += data
                while b"\n" in self._buf:
                    line, _, self._buf = self._buf.partition(b"\n")
                    msg = json.loads(line)
                    rid = msg.get("id") if "method" not in msg else None
                    if isinstance(rid, int) and rid in self._texts:
                        self._texts[rid] = line
                    self._route(msg)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.closed.set()
            for ch in self._waiting.values():
                ch.close()

    def _route(self, msg: dict[str, Any]) -> None:
        if "method" in msg and "id" not in msg:
            self.notifications.append(msg)
            self.notified.set()
            return
        ch = self._waiting.pop(msg.get("id"), None)
        if ch is None:
            self.unmatched.append(msg)
            self._unmatched_event.set()
        else:
            ch.send_nowait(msg)

    async def wait_notifications(self, count: int) -> list[dict[str, Any]]:
        """Wait until ``count`` notifications arrived in all."""
        while len(self.notifications) < count:
            self.notified = trio.Event()
            await self.notified.wait()
        return self.notifications

    async def wait_unmatched(self, count: int) -> list[dict[str, Any]]:
        """Wait until ``count`` replies arrived that no request of ours was waiting for."""
        while len(self.unmatched) < count:
            self._unmatched_event = trio.Event()
            await self._unmatched_event.wait()
        return self.unmatched

    async def send_raw(self, data: bytes) -> None:
        async with self._send_lock:
            await self.stream.send_all(data)

    async def rpc(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        rid: Any = None,
        meta: bool | None = None,
    ) -> dict[str, Any]:
        """Send a request; return the whole reply (with "result" or "error")."""
        rid = next(self._ids) if rid is None else rid
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        p = dict(params or {})
        if self.modern if meta is None else meta:
            p["_meta"] = {**META, **p.get("_meta", {})}
        if p:
            body["params"] = p
        send, recv = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[rid] = send
        await self.send_raw(json.dumps(body).encode() + b"\n")
        async with recv:
            try:
                return await recv.receive()
            except trio.EndOfChannel:
                raise ConnectionError("connection closed before the reply") from None

    async def rpc_text(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        """The reply to a request as the line mcpd wrote (which ``json.loads`` would
        read one way of several where an object gives a key twice)."""
        rid = next(self._ids)
        self._texts[rid] = None
        await self.rpc(method, params, rid=rid)
        line = self._texts.pop(rid)
        assert line is not None
        return line

    async def result(self, method: str, params: dict[str, Any] | None = None) -> Any:
        reply = await self.rpc(method, params)
        assert "result" in reply, reply
        return reply["result"]

    async def initialize(self) -> dict[str, Any]:
        result = await self.result(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "legacy-agent", "version": "0"},
            },
        )
        await self.send_raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        return result  # type: ignore[no-any-return]

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.result("tools/call", {"name": name, "arguments": arguments or {}})  # type: ignore[no-any-return]

    async def use_profile(self, name: str) -> dict[str, Any]:
        return await self.result("mcpd/useProfile", {"profile": name})  # type: ignore[no-any-return]

    async def tools(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor = None
        while True:
            result = await self.result("tools/list", {"cursor": cursor} if cursor else None)
            out += result["tools"]
            cursor = result.get("nextCursor")
            if cursor is None:
                return out


@contextlib.asynccontextmanager
async def connect(path: str, modern: bool = True) -> AsyncIterator[Agent]:
    stream = await trio.open_unix_socket(path)
    agent = Agent(stream, modern)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.reader)
        try:
            yield agent
        finally:
            await stream.aclose()
            nursery.cancel_scope.cancel()


def make_config(
    tmp_path: Path,
    servers: dict[str, Any],
    *,
    profiles: dict[str, Any] | None = None,
    **daemon: Any,
) -> Config:
    daemon.setdefault("socket", str(tmp_path / "mcpd.sock"))
    daemon.setdefault("startup_deadline", 20.0)
    daemon.setdefault("backoff_base", 0.05)
    daemon.setdefault("backoff_cap", 0.5)
    return parse_config({"daemon": daemon, "servers": servers, "profiles": profiles or {}})


@contextlib.asynccontextmanager
async def running(
    config: Config, config_path: str | None = None, *, splice: bool = True
) -> AsyncIterator[Daemon]:
    daemon = Daemon(config, config_path=config_path, splice=splice)
    with single_exceptions():
        async with trio.open_nursery() as nursery:
            await nursery.start(daemon.run)
            try:
                yield daemon
            finally:
                daemon.stop()


@contextlib.asynccontextmanager
async def two_agents(config: Config) -> AsyncIterator[tuple[Daemon, Agent, Agent]]:
    """A daemon and two agents on its socket: one whose calls a test aims at, and
    another that must not be caught up in what happens to them."""
    async with (
        running(config) as daemon,
        connect(daemon.socket_path) as agent,
        connect(daemon.socket_path) as other,
    ):
        yield daemon, agent, other
