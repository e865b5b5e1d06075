"""The HTTP+SSE transport (2024-11-05) against real servers that still speak it: the
v1 Python SDK's ``FastMCP`` run with ``mcp.run("sse")``, and mcp-proxy's /sse in front
of a stdio server.

Each test starts its server as a process on a free port, talks to it through the
transport itself, and, where a connection has to be cut, through a relay that can
cut one.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest
import trio
from msgspec import Raw

from mcpd.servers.connected.upstream import Upstream
from protocol.jsonrpc import messages as rpc
from tests.support.hosts.third_party import peer_server, relay
from tests.support.hosts.wiretap import free_port
from transports.errors import StreamCut, TransportClosed, TransportError
from transports.sse.detect import detect_http_transport
from transports.sse.transport import LegacySSETransport, open_legacy_sse_transport

pytestmark = pytest.mark.interop

TOOLS = ["count_up", "nap", "shout"]
PEERS = ["sdk1", "mcp-proxy"]
LIMIT = 60


def decoded(raw: Raw) -> Any:
    return json.loads(bytes(raw))


def text_of(raw: Raw) -> str:
    return "".join(c.get("text", "") for c in decoded(raw)["content"])


async def handshake(t: LegacySSETransport, version: str = "2024-11-05") -> Any:
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "mcpd-test", "version": "0"},
    }
    result = decoded(await t.request("initialize", params, cancellable=False))
    await t.notify("notifications/initialized", None)
    return result


async def call(t: LegacySSETransport, name: str, **arguments: Any) -> Raw:
    return await t.request("tools/call", {"name": name, "arguments": arguments})


class Napping:
    """Calls to ``nap`` that fail only when the transport does; ``wait`` returns once
    the server has started them all (each reports progress as it starts)."""

    def __init__(self) -> None:
        self.failures: list[TransportError] = []
        self.started: list[Any] = []
        self._grew = trio.Event()

    def on_notification(self, note: rpc.Notification) -> None:
        if note.method == "notifications/progress" and note.params is not None:
            self.started.append(decoded(note.params)["progressToken"])
            self._grew.set()
            self._grew = trio.Event()

    async def nap(self, t: LegacySSETransport, token: str) -> None:
        params = {"name": "nap", "arguments": {"seconds": 30}, "_meta": {"progressToken": token}}
        try:
            await t.request("tools/call", params)
        except TransportError as exc:
            self.failures.append(exc)

    async def wait(self, count: int) -> None:
        while len(self.started) < count:
            await self._grew.wait()


@pytest.mark.parametrize("peer", PEERS)
async def test_a_session_over_the_old_transport(peer: str) -> None:
    seen: list[rpc.Notification] = []
    with trio.fail_after(LIMIT):
        async with (
            peer_server(peer) as server,
            open_legacy_sse_transport("old", server.url("/sse"), on_notification=seen.append) as t,
        ):
            assert t.endpoint is not None
            assert t.endpoint.startswith(server.url("/messages/?session_id="))
            init = await handshake(t)
            assert init["protocolVersion"] == "2024-11-05"
            assert init["serverInfo"]["name"] == "interop-sdk1-sse-server"

            tools = decoded(await t.request("tools/list", None))["tools"]
            assert sorted(tool["name"] for tool in tools) == TOOLS
            assert text_of(await call(t, "shout", text="old school")) == "OLD SCHOOL"

            params = {"name": "count_up", "arguments": {"steps": 3}, "_meta": {"progressToken": 9}}
            assert text_of(await t.request("tools/call", params)) == "counted 3"
            progress = [
                decoded(n.params) for n in seen if n.method == "notifications/progress" and n.params
            ]
            assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [
                (9, 1, 3),
                (9, 2, 3),
                (9, 3, 3),
            ]
            assert [p.get("message") for p in progress] == ["step 1", "step 2", "step 3"]

            with pytest.raises(rpc.RPCError):
                await t.request("no/such/method", None)

            # A call given up on: the server is told, and the transport goes on.
            with trio.move_on_after(0.5):
                await call(t, "nap", seconds=30)
            assert text_of(await call(t, "shout", text="still here")) == "STILL HERE"
            assert not t.closed.is_set()


@pytest.mark.parametrize("peer", PEERS)
async def test_the_server_killed_and_restarted(peer: str) -> None:
    port = free_port()
    naps = Napping()
    with trio.fail_after(LIMIT):
        async with peer_server(peer, port) as server:
            async with (
                open_legacy_sse_transport(
                    "old", server.url("/sse"), on_notification=naps.on_notification
                ) as t,
                trio.open_nursery() as nursery,
            ):
                await handshake(t)
                nursery.start_soon(naps.nap, t, "a")
                nursery.start_soon(naps.nap, t, "b")
                await naps.wait(2)
                os.killpg(server.proc.pid, signal.SIGKILL)
                await t.closed.wait()
            # Both waiting calls failed at once, with the transport's own reason.
            assert naps.failures == [t.error, t.error]
            assert isinstance(t.error, StreamCut | TransportClosed)
            assert "event stream" in t.error.reason
            with pytest.raises(TransportError) as info:
                await call(t, "shout", text="anyone?")
            assert info.value is t.error

        # What the supervisor does next: a new transport, a new handshake.
        async with (
            peer_server(peer, port) as server,
            open_legacy_sse_transport("old", server.url("/sse")) as fresh,
        ):
            await handshake(fresh)
            assert text_of(await call(fresh, "shout", text="back")) == "BACK"


@pytest.mark.parametrize("peer", PEERS)
async def test_the_stream_dropped(peer: str) -> None:
    naps = Napping()
    with trio.fail_after(LIMIT):
        async with peer_server(peer) as server, relay(server.port) as r:
            async with (
                open_legacy_sse_transport(
                    "old", r.url(), on_notification=naps.on_notification
                ) as t,
                trio.open_nursery() as nursery,
            ):
                await handshake(t)
                nursery.start_soon(naps.nap, t, "a")
                await naps.wait(1)
                r.cut(0)
                await t.closed.wait()
            assert naps.failures == [t.error]
            assert isinstance(t.error, TransportClosed | StreamCut)
            assert "event stream" in t.error.reason

            # The server is fine; only that session is gone. A new one works.
            async with open_legacy_sse_transport("old", r.url()) as fresh:
                await handshake(fresh)
                assert text_of(await call(fresh, "shout", text="again")) == "AGAIN"


async def test_upstream_finds_the_legacy_era_over_the_old_transport() -> None:
    """What the daemon's upstream makes of such a server: the probe fails, and the
    handshake settles on a version the server offers."""
    with trio.fail_after(LIMIT):
        async with (
            peer_server("sdk1") as server,
            open_legacy_sse_transport("old", server.url("/sse")) as t,
        ):
            up = Upstream("old", t, http=False)
            await up.connect()
            assert up.era == "legacy"
            listing = await up.list_tools()
            assert sorted(tool.name for tool in listing.tools) == TOOLS
    assert up.version == "2025-11-25"


@pytest.mark.parametrize(
    ("peer", "path", "kind"),
    [
        ("sdk1", "/sse", "sse"),
        ("mcp-proxy", "/sse", "sse"),
        ("mcp-proxy", "/mcp", "streamable-http"),
    ],
)
async def test_detect_real_servers(peer: str, path: str, kind: str) -> None:
    with trio.fail_after(LIMIT):
        async with peer_server(peer) as server:
            assert await detect_http_transport("x", server.url(path)) == kind
