"""mcpd's Streamable HTTP client against real servers nobody here wrote, both eras.

Each test starts its server as a process on a free port and talks to it through a
wire tap, so the assertions can name what went over the wire (the era probe, the
session header, the DELETE at the end) as well as what mcpd made of the answers.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec import UNSET, Raw

from mcpd.servers.connected.handshake import client_meta
from mcpd.servers.connected.upstream import Upstream
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.hosts.peers import SERVERS, V1_PYTHON, node_env, node_tool, v1_python
from tests.support.hosts.wiretap import (
    ServerProcess,
    TappedRequest,
    WireTap,
    free_port,
    serve,
    wiretap,
)
from tests.support.parts.calls import at_upstream
from transports.errors import HttpRPCError, SessionExpired
from transports.http.transport import HttpTransport, open_http_transport

# A pytestmark in conftest.py marks nothing, so each module marks itself.
pytestmark = pytest.mark.interop

SDK_SERVER = str(SERVERS / "sdk_server.py")
SDK_TOOLS = ["boom", "count_up", "long_text", "nap", "shout"]
SDK_MODES = {
    "sse": [],
    "json": ["--json"],
    "sse-stateless": ["--stateless"],
    "json-stateless": ["--json", "--stateless"],
}
MODERN = ("modern", "2026-07-28")
LEGACY = ("legacy", "2025-11-25")


def decoded(raw: Raw) -> Any:
    return json.loads(bytes(raw))


def text_of(raw: Raw) -> str:
    return "".join(c.get("text", "") for c in decoded(raw)["content"])


async def call(up: Upstream, name: str, arguments: dict[str, Any], **meta: Any) -> Raw:
    params = mcp.CallToolParams(
        name=name, arguments=Raw(json.dumps(arguments).encode()), meta=meta or UNSET
    )
    return await at_upstream(up, params)


def progress_of(seen: list[rpc.Notification], token: str) -> list[dict[str, Any]]:
    out = []
    for note in seen:
        if note.method != "notifications/progress":
            continue
        params = decoded(note.params) if isinstance(note.params, Raw) else note.params
        if params.get("progressToken") == token:
            out.append(params)
    return out


async def unknown_method(up: Upstream) -> rpc.RPCError:
    params = mcp.MetaOnlyParams(meta=client_meta(up.version, {})) if up.era == "modern" else None
    with pytest.raises(rpc.RPCError) as info:
        await up.request("no/such/method", params)
    return info.value


async def session_refused(url: str, session: str, version: str) -> bool:
    """Whether the server now refuses ``session`` (asked with a transport of our own)."""
    t = HttpTransport("check", url)
    t.session_id = session
    try:
        await t.request("tools/list", None, headers={"MCP-Protocol-Version": version})
    except SessionExpired:
        return True
    finally:
        t.session_id = None
        await t.aclose()
    return False


def posts(tap: WireTap) -> list[TappedRequest]:
    return [r for r in tap.requests if r.method == "POST"]


@asynccontextmanager
async def sdk_server(*flags: str) -> AsyncIterator[tuple[ServerProcess, WireTap]]:
    port = free_port()
    async with (
        serve([sys.executable, SDK_SERVER, "http", str(port), *flags], port) as server,
        wiretap(port) as tap,
    ):
        yield server, tap


# -- the official Python SDK (mcp 2.3.0), every response mode, both eras --


@pytest.mark.parametrize("era", ["auto", "legacy"])
@pytest.mark.parametrize("mode", list(SDK_MODES))
async def test_official_sdk_server(mode: str, era: str) -> None:
    stateful = "stateless" not in mode
    sse = not mode.startswith("json")
    seen: list[rpc.Notification] = []
    with trio.fail_after(60):
        async with sdk_server(*SDK_MODES[mode]) as (server, tap):
            async with open_http_transport("sdk", tap.url(), on_notification=seen.append) as t:
                up = Upstream("sdk", t, http=True, era=era)
                await up.connect()
                assert (up.era, up.version) == (MODERN if era == "auto" else LEGACY)
                session = t.session_id
                if era == "legacy" and stateful:
                    assert session is not None
                else:
                    assert session is None

                listing = await up.list_tools()
                assert sorted(tool.name for tool in listing.tools) == SDK_TOOLS
                assert text_of(await call(up, "shout", {"text": "over http"})) == "OVER HTTP"

                failed = decoded(await call(up, "boom", {"message": "kaboom"}))
                assert failed["isError"] is True

                error = await unknown_method(up)
                assert error.code == rpc.METHOD_NOT_FOUND
                if up.era == "modern":
                    assert isinstance(error, HttpRPCError) and error.http_status == 404

                big = text_of(await call(up, "long_text", {"kb": 200}))
                assert len(big) == 200 * 1024

                done = text_of(await call(up, "count_up", {"steps": 3}, progressToken="tick"))
                assert done == "counted 3"
                progress = progress_of(seen, "tick")
                if sse:
                    assert [p["progress"] for p in progress] == [1, 2, 3]
                    assert [p.get("message") for p in progress] == ["step 1", "step 2", "step 3"]
                    assert all(p.get("total") == 3 for p in progress)
                else:
                    assert progress == []  # a JSON reply has no room for notifications

            if session is not None:
                # The session ended with the transport, and the server knows it.
                await server.wait_output(f"Terminating session: {session}")
                assert await session_refused(server.url(), session, up.version)

    methods = tap.rpc_methods()
    if era == "auto":
        assert methods[0] == "server/discover"
        assert "initialize" not in methods
    else:
        assert methods[:2] == ["initialize", "notifications/initialized"]
    for req in posts(tap):
        if up.era == "modern":
            assert req.headers["mcp-protocol-version"] == "2026-07-28"
            assert req.headers["mcp-method"] == req.rpc_method
            if req.rpc_method == "tools/call":
                assert req.headers["mcp-name"] == req.rpc["params"]["name"]
            assert "mcp-session-id" not in req.headers
        elif req.rpc_method != "initialize":
            assert req.headers["mcp-protocol-version"] == "2025-11-25"
            assert req.headers.get("mcp-session-id") == session
    deletes = [r for r in tap.requests if r.method == "DELETE"]
    if session is not None:
        assert methods[-1] == "DELETE"
        assert [d.headers["mcp-session-id"] for d in deletes] == [session]
    else:
        assert deletes == []


@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_sdk_server_call_cancelled(era: str) -> None:
    with trio.fail_after(60):
        async with sdk_server() as (_, tap), open_http_transport("sdk", tap.url()) as t:
            up = Upstream("sdk", t, http=True, era=era)
            await up.connect()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, up, "nap", {"seconds": 60})
                sent = await tap.wait_for("tools/call")
                nursery.cancel_scope.cancel()
            if up.era == "legacy":
                # A legacy server is told; dropping the stream cancels nothing there.
                cancel = await tap.wait_for("notifications/cancelled")
                assert cancel.rpc["params"]["requestId"] == sent.rpc["id"]
                assert cancel.headers["mcp-session-id"] == t.session_id
            # The server still answers on the same transport.
            assert text_of(await call(up, "shout", {"text": "next"})) == "NEXT"
    if era == "auto":
        # 2026-07-28 cancels by closing the stream, with no notification.
        assert "notifications/cancelled" not in tap.rpc_methods()


async def test_sdk_session_expiry_initializes_again_once() -> None:
    with trio.fail_after(60):
        async with sdk_server("--idle", "1") as (server, tap):
            async with open_http_transport("sdk", tap.url()) as t:
                up = Upstream("sdk", t, http=True, era="legacy")
                await up.connect()
                first = t.session_id
                assert first is not None
                assert text_of(await call(up, "shout", {"text": "before"})) == "BEFORE"

                await server.wait_output(f"Session {first} idle timeout")
                assert text_of(await call(up, "shout", {"text": "after"})) == "AFTER"

                second = t.session_id
                assert second is not None and second != first
                assert (up.era, up.version) == LEGACY
            await server.wait_output(f"Terminating session: {second}")

    calls = [r for r in posts(tap) if r.rpc_method == "tools/call"]
    assert [c.headers["mcp-session-id"] for c in calls] == [first, first, second]
    # The same request went out again, as a new request with a new id.
    assert calls[1].rpc["params"] == calls[2].rpc["params"]
    assert calls[1].rpc["id"] != calls[2].rpc["id"]
    assert tap.rpc_methods().count("initialize") == 2
    assert server.count("Rejected request with unknown or expired session ID") == 1


async def test_sdk_server_requests_during_a_legacy_call_are_answered() -> None:
    with trio.fail_after(60):
        async with sdk_server("--ask") as (_, tap), open_http_transport("sdk", tap.url()) as t:
            up = Upstream("sdk", t, http=True, era="legacy")
            await up.connect()
            session = t.session_id
            # The tool pings mcpd and then asks it to elicit, both on the call's own
            # stream, and waits for each answer before it goes on.
            text = text_of(await call(up, "ask", {}))
    assert text == "pinged; elicitation refused: mcpd does not support 'elicitation/create'"

    answers = [r for r in posts(tap) if r.rpc_method is None]
    assert [a.rpc.get("result", a.rpc.get("error", {}).get("code")) for a in answers] == [
        {},
        rpc.METHOD_NOT_FOUND,
    ]
    for answer in answers:
        assert answer.headers["mcp-session-id"] == session
        assert answer.headers["mcp-protocol-version"] == "2025-11-25"


# -- @modelcontextprotocol/server-everything (TS SDK 1.32): legacy only --


@asynccontextmanager
async def everything_server() -> AsyncIterator[tuple[ServerProcess, WireTap]]:
    port = free_port()
    argv = [node_tool("mcp-server-everything"), "streamableHttp"]
    env = {**node_env(), "PORT": str(port)}
    async with serve(argv, port, env) as server, wiretap(port) as tap:
        yield server, tap


async def test_everything_server_over_http() -> None:
    seen: list[rpc.Notification] = []
    with trio.fail_after(60):
        async with everything_server() as (server, tap):
            async with open_http_transport("ev", tap.url(), on_notification=seen.append) as t:
                up = Upstream("ev", t, http=True)
                await up.connect()
                assert (up.era, up.version) == LEGACY
                first = t.session_id
                assert first is not None

                names = {tool.name for tool in (await up.list_tools()).tools}
                assert {"echo", "get-sum", "trigger-long-running-operation"} <= names
                assert text_of(await call(up, "echo", {"message": "hi"})) == "Echo: hi"
                assert "5" in text_of(await call(up, "get-sum", {"a": 2, "b": 3}))

                # Its replies start with a priming event (an id and empty data).
                args = {"duration": 0.3, "steps": 3}
                await call(up, "trigger-long-running-operation", args, progressToken=7)
                assert [p["progress"] for p in progress_of(seen, 7)] == [1, 2, 3]

                # It answers an unknown session with 400 (not 404): a new handshake.
                t.session_id = "no-such-session"
                assert text_of(await call(up, "echo", {"message": "again"})) == "Echo: again"
                second = t.session_id
                assert second not in (None, first, "no-such-session")
            assert second is not None
            assert await session_refused(server.url(), second, "2025-11-25")

    methods = tap.rpc_methods()
    assert methods[:3] == ["server/discover", "initialize", "notifications/initialized"]
    assert tap.server_sent(rb"HTTP/1.1 400 .*-32000,\"message\":\"Bad Request: Server not init")
    assert tap.server_sent(rb"id: [^\r\n]+\r?\ndata: ?\r?\n\r?\n")  # a priming event
    assert tap.server_sent(rb"HTTP/1.1 400 .*No valid session ID provided")
    assert methods.count("initialize") == 2
    assert methods[-1] == "DELETE"
    assert tap.requests[-1].headers["mcp-session-id"] == second


# -- mcp-proxy 0.13 (v1 SDK) in front of a stdio server: legacy only --


@pytest.mark.parametrize("stateless", [False, True], ids=["stateful", "stateless"])
async def test_mcp_proxy_over_stdio_server(stateless: bool) -> None:
    port = free_port()
    proxy = str(Path(v1_python()).with_name("mcp-proxy"))
    argv = [proxy, "--port", str(port), "--host", "127.0.0.1"]
    argv += ["--stateless"] if stateless else []
    argv += ["--", str(V1_PYTHON), str(SERVERS / "sdk1_server.py"), "stdio"]
    with trio.fail_after(60):
        async with serve(argv, port) as server, wiretap(port) as tap:
            async with open_http_transport("proxy", tap.url()) as t:
                up = Upstream("proxy", t, http=True)
                await up.connect()
                assert (up.era, up.version) == LEGACY
                session = t.session_id
                assert (session is None) is stateless
                names = {tool.name for tool in (await up.list_tools()).tools}
                assert names == {"shout", "boom"}
                assert text_of(await call(up, "shout", {"text": "proxied"})) == "PROXIED"
                failed = decoded(await call(up, "boom", {"message": "kaboom"}))
                assert failed["isError"] is True and "kaboom" in json.dumps(failed)
            if session is not None:
                assert await session_refused(server.url(), session, up.version)

    methods = tap.rpc_methods()
    assert methods[:3] == ["server/discover", "initialize", "notifications/initialized"]
    # Both refuse the probe with a 400 whose id is the string "server-error", one for
    # the missing session, the other for the protocol version.
    reason = "Unsupported protocol version" if stateless else "Missing session ID"
    assert tap.server_sent(rb"HTTP/1.1 400 .*\"id\":\"server-error\".*" + reason.encode())
    assert (methods[-1] == "DELETE") is not stateless


# -- the whole daemon, HTTP servers of both eras behind one socket --


async def agent_progress(agent: Agent, token: str, count: int) -> list[dict[str, Any]]:
    """The agent's progress notifications for ``token``, once ``count`` have come."""
    while True:
        found = [
            n["params"]
            for n in agent.notifications
            if n["method"] == "notifications/progress" and n["params"]["progressToken"] == token
        ]
        if len(found) >= count:
            return found
        agent.notified = trio.Event()
        await agent.notified.wait()


async def test_daemon_over_http_servers(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with sdk_server() as (sdk, _), everything_server() as (ev, _):
            cfg = make_config(
                tmp_path,
                {
                    "sdk": {"url": sdk.url()},
                    "old": {"url": sdk.url(), "era": "legacy"},
                    "ev": {"url": ev.url()},
                    # Configured modern-only, which server-everything is not.
                    "strict": {"url": ev.url(), "era": "modern"},
                },
            )
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                status = {s["alias"]: s for s in (await agent.result("mcpd/status"))["servers"]}
                states = {a: (s["state"], s["era"]) for a, s in status.items()}
                assert states.pop("strict")[0] not in ("ready", "degraded")
                assert "does not speak protocol 2026-07-28" in status["strict"]["last_error"]
                assert states == {
                    "sdk": ("ready", "modern"),
                    "old": ("ready", "legacy"),
                    "ev": ("ready", "legacy"),
                }
                names = {tool["name"] for tool in await agent.tools()}
                assert {"mcp__sdk__shout", "mcp__old__shout", "mcp__ev__echo"} <= names
                for alias in ("sdk", "old"):
                    result = await agent.call(f"mcp__{alias}__shout", {"text": alias})
                    assert result["content"][0]["text"] == alias.upper()
                    assert result["resultType"] == "complete"
                    failed = await agent.call(f"mcp__{alias}__boom", {})
                    assert failed["isError"] is True
                    # Progress from the server's event stream reaches the agent, with
                    # the agent's own token.
                    token = f"progress-{alias}"
                    done = await agent.result(
                        "tools/call",
                        {
                            "name": f"mcp__{alias}__count_up",
                            "arguments": {"steps": 2},
                            "_meta": {"progressToken": token},
                        },
                    )
                    assert done["content"][0]["text"] == "counted 2"
                    progress = await agent_progress(agent, token, 2)
                    assert [p["progress"] for p in progress] == [1, 2]
                result = await agent.call("mcp__ev__echo", {"message": "daemon"})
                assert result["content"][0]["text"] == "Echo: daemon"
                assert result["resultType"] == "complete"
                small = await agent.call("mcp__sdk__long_text", {"kb": 4})
                assert len(small["content"][0]["text"]) == 4 * 1024
                # 200 KB reach mcpd whole and are cut to the text budget for the model.
                big = await agent.call("mcp__old__long_text", {"kb": 200})
                texts = [c["text"] for c in big["content"]]
                assert len(texts[0]) == cfg.daemon.result_budget_chars
                assert f"this result was {200 * 1024} characters" in texts[-1]
            # Stopping the daemon ended the legacy session on the SDK server.
            await sdk.wait_output("Terminating session: ")


async def test_daemon_follows_a_modern_servers_tool_list(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with sdk_server("--grow") as (_, tap):
            cfg = make_config(tmp_path, {"sdk": {"url": tap.url()}})
            async with running(cfg) as daemon, connect(daemon.socket_path, modern=False) as agent:
                await agent.initialize()
                names = {tool["name"] for tool in await agent.tools()}
                assert "mcp__sdk__grow" in names and "mcp__sdk__grown" not in names

                result = await agent.call("mcp__sdk__grow", {"name": "grown"})
                assert result["content"][0]["text"] == "added grown"
                # The server tells mcpd on its subscription; mcpd tells its agents.
                while not any(
                    n["method"] == "notifications/tools/list_changed" for n in agent.notifications
                ):
                    agent.notified = trio.Event()
                    await agent.notified.wait()
                names = {tool["name"] for tool in await agent.tools()}
                assert "mcp__sdk__grown" in names
                result = await agent.call("mcp__sdk__grown", {})
                assert result["content"][0]["text"] == "grown"

    listens = [r for r in posts(tap) if r.rpc_method == "subscriptions/listen"]
    assert listens and listens[0].headers["mcp-method"] == "subscriptions/listen"
    # One listen holds everything the server can tell: tools, prompts, resources.
    assert listens[0].rpc["params"]["notifications"] == {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
    }


class LogWatch(logging.Handler):
    """The daemon's log lines, waited for by their text (the daemon runs in this process)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self._grew = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        self._grew.set()
        self._grew = trio.Event()

    async def wait_for(self, text: str) -> str:
        while True:
            for line in self.lines:
                if text in line:
                    return line
            await self._grew.wait()


async def test_daemon_holds_server_everythings_push_stream(tmp_path: Path) -> None:
    # server-everything sends its simulated log messages (notifications/message, one
    # at once and then every 5 s) as notifications of no request: only a client that
    # holds the session's GET stream gets them. The daemon logs them as the server's.
    watch = LogWatch()
    server_log = logging.getLogger("mcpd.server")
    level = server_log.level
    server_log.addHandler(watch)
    server_log.setLevel(logging.INFO)
    try:
        with trio.fail_after(60):
            async with everything_server() as (ev, tap):
                cfg = make_config(tmp_path, {"ev": {"url": tap.url()}})
                async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                    get = await tap.wait_for("GET")
                    toggle = "mcp__ev__toggle-simulated-logging"
                    started = await agent.call(toggle)
                    assert "Started simulated" in started["content"][0]["text"]
                    line = await watch.wait_for("-level message - SessionId ")
                    # The stream survives: calls go on beside it, and it was opened once.
                    result = await agent.call("mcp__ev__echo", {"message": "still here"})
                    assert result["content"][0]["text"] == "Echo: still here"
                    stopped = await agent.call(toggle)
                    assert "Stopped simulated" in stopped["content"][0]["text"]
    finally:
        server_log.removeHandler(watch)
        server_log.setLevel(level)

    session = get.headers["mcp-session-id"]
    assert line.endswith(f"SessionId {session}")
    assert get.headers["accept"] == "text/event-stream"
    assert get.headers["mcp-protocol-version"] == "2025-11-25"
    assert "last-event-id" not in get.headers
    calls = [r for r in posts(tap) if r.rpc_method == "tools/call"]
    assert {c.headers["mcp-session-id"] for c in calls} == {session}
    assert tap.rpc_methods().count("GET") == 1
    assert ev.count("Establishing new SSE stream") == 1
    # The server answered the GET with an event stream, and the messages came on it.
    assert tap.server_sent(rb"HTTP/1.1 200 .*text/event-stream.*notifications/message")
    assert tap.rpc_methods()[-1] == "DELETE"
