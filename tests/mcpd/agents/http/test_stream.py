"""GET /mcp on the HTTP endpoint: a legacy session's event stream, where its agent hears
unasked what an agent on the socket hears (list changes, resource updates). One stream
per session; it ends when the session does; a client that stops reading loses its
stream, and nobody else notices."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import h11
import pytest
import trio

import mcpd.agents.http.stream
from mcpd.agents.connection.outbox import QUEUE_BYTES
from mcpd.config.loading.load import load
from mcpd.daemon import Daemon
from mcpd.local.state.endpoint_token import write_token
from protocol.jsonrpc import messages as rpc
from tests.support.clients.agent import running
from tests.support.clients.daemon_http import http
from tests.support.clients.http_stream_client import (
    Client,
    open_session,
    session_headers,
    stream_headers,
)
from tests.support.system.procs import scripted

LIMIT = 60


def toml_server(*flags: str) -> str:
    command, args = scripted(*flags)
    return f"command = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"


def write_config(path: Path, servers: dict[str, str], extra: str = "") -> None:
    text = (
        f'[daemon]\nsocket = "{path.parent / "mcpd.sock"}"\n'
        f'state_dir = "{path.parent / "state"}"\nhttp_listen = "127.0.0.1:0"\n'
        "backoff_base = 0.05\n"
    )
    for alias, body in servers.items():
        text += f"\n[servers.{alias}]\n{body}"
    path.write_text(text + extra)


@asynccontextmanager
async def daemon_with(tmp_path: Path, extra: str = "", **servers: str) -> AsyncIterator[Daemon]:
    path = tmp_path / "mcpd.toml"
    write_config(path, servers, extra)
    async with running(load(path), str(path)) as daemon:
        yield daemon


async def reload_with(daemon: Daemon, extra: str = "", **servers: str) -> None:
    assert daemon.config_path is not None
    write_config(Path(daemon.config_path), servers, extra)
    await daemon.reload()


async def wait_for(predicate: Any) -> None:
    while not predicate():
        await trio.sleep(0.01)


async def test_one_stream_per_session_carries_list_changes_and_ends_with_it(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path, alpha=toml_server("--tools", "2")) as daemon:
            sid = await open_session(daemon)
            news = daemon.agent_server.http.sessions[sid].news
            async with Client.open(daemon) as stream, Client.open(daemon) as other:
                status, head = await stream.start("GET", stream_headers(sid))
                assert status == 200 and head["content-type"] == "text/event-stream"
                await wait_for(lambda: news.streaming)
                second, _, body = await other.request("GET", stream_headers(sid))
                assert second == 409 and b"already open" in body

                await reload_with(
                    daemon, alpha=toml_server("--tools", "2"), beta=toml_server("--names", "jot")
                )
                assert await stream.message() == {
                    "jsonrpc": "2.0",
                    "method": "notifications/tools/list_changed",
                }
                listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
                _, _, body = await other.request("POST", session_headers(sid), listed)
                assert "mcp__beta__jot" in {t["name"] for t in json.loads(body)["result"]["tools"]}

                gone, _, _ = await other.request("DELETE", {"mcp-session-id": sid})
                assert gone == 200
                assert await stream.message() is None  # the stream ended, whole
                assert (await other.request("GET", stream_headers(sid)))[0] == 404


async def test_news_before_the_stream_opens_waits_for_it(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path, alpha=toml_server("--tools", "1")) as daemon:
            sid = await open_session(daemon)
            news = daemon.agent_server.http.sessions[sid].news
            await reload_with(daemon, alpha=toml_server("--tools", "1"), beta=toml_server())
            # The broadcast went out while no stream was open (as between initialize and
            # the client's GET, or while it reconnects).
            await wait_for(lambda: news.seen_version == news.profile.version)
            async with Client.open(daemon) as stream:
                assert (await stream.start("GET", stream_headers(sid)))[0] == 200
                first = await stream.message()
                assert first is not None
                assert first["method"] == "notifications/tools/list_changed"


async def test_the_stream_ends_whole_when_the_session_is_pushed_out_or_its_socket_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mcpd.agents.http.mcp_route

    monkeypatch.setattr(mcpd.agents.http.mcp_route, "MAX_SESSIONS", 1)
    side = tmp_path / "side.sock"
    profile = f'\n[profiles.side]\nservers = ["alpha"]\nsocket = "{side}"\n'
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path, profile, alpha=toml_server()) as daemon:
            first = await open_session(daemon)
            async with Client.open(daemon) as stream:
                assert (await stream.start("GET", stream_headers(first)))[0] == 200
                await open_session(daemon)  # one too many: the oldest session ends
                assert await stream.message() is None
            # A reload that closes the profile's own socket ends the streams on it.
            on_side = await open_session(daemon, unix=str(side))
            async with Client.open(daemon, unix=str(side)) as stream:
                assert (await stream.start("GET", stream_headers(on_side)))[0] == 200
                news = daemon.agent_server.http.sessions[on_side].news
                await wait_for(lambda: news.streaming)
                await reload_with(daemon, alpha=toml_server())
                assert await stream.message() is None


async def test_the_stream_ends_whole_when_the_daemon_stops(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path, alpha=toml_server()) as daemon:
            sid = await open_session(daemon)
            async with Client.open(daemon) as stream:
                assert (await stream.start("GET", stream_headers(sid)))[0] == 200
                await wait_for(lambda: daemon.agent_server.http.sessions[sid].news.streaming)
                daemon.stop()
                assert await stream.message() is None


async def test_a_get_that_cannot_open_a_stream_is_told_why(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path, alpha=toml_server()) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            sid = await open_session(daemon)
            auth = {"Authorization": f"Bearer {token}"}

            plain = await http(port, "GET", "/mcp", {**auth, "Accept": "application/json"})
            assert plain.status == 406
            assert "Accept: text/event-stream" in plain.json()["error"]["message"]
            modern = await http(
                port,
                "GET",
                "/mcp",
                {**auth, "Accept": "text/event-stream", "MCP-Protocol-Version": "2026-07-28"},
            )
            assert modern.status == 405 and modern.headers["allow"] == "POST"
            assert "subscriptions/listen" in modern.json()["error"]["message"]
            bare = await http(port, "GET", "/mcp", {**auth, "Accept": "text/event-stream"})
            assert bare.status == 400 and "Missing session ID" in bare.json()["error"]["message"]
            unknown = await http(port, "GET", "/mcp", {**auth, **stream_headers("0" * 32)})
            assert unknown.status == 404
            put = await http(port, "PUT", "/mcp", {**auth, **stream_headers(sid)})
            assert put.status == 405 and put.headers["allow"] == "GET, POST, DELETE"
            no_token = await http(port, "GET", "/mcp", stream_headers(sid))
            assert no_token.status == 401


async def test_a_rotated_token_ends_an_open_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcpd.agents.http.stream, "KEEPALIVE", 0.1)
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path, alpha=toml_server()) as daemon:
            sid = await open_session(daemon)
            async with Client.open(daemon) as stream:
                assert (await stream.start("GET", stream_headers(sid)))[0] == 200
                data = b""
                while b": keep-alive\n\n" not in data:  # a quiet stream says it is alive
                    event = await stream._next()
                    assert isinstance(event, h11.Data)
                    data += event.data
                write_token(str(tmp_path / "state" / "token"))
                assert await stream.message() is None
            assert sid in daemon.agent_server.http.sessions  # the session itself stays


async def test_a_rotated_token_ends_a_stream_that_news_keeps_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No keep-alive comes in the test's time: only the news is written.
    monkeypatch.setattr(mcpd.agents.http.stream, "KEEPALIVE", LIMIT * 10)
    alpha = toml_server("--tools", "1")
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path, alpha=alpha) as daemon:
            sid = await open_session(daemon)
            async with Client.open(daemon) as stream:
                assert (await stream.start("GET", stream_headers(sid)))[0] == 200
                changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
                await reload_with(daemon, alpha=alpha, beta=toml_server())
                assert await stream.message() == changed
                write_token(str(tmp_path / "state" / "token"))
                await reload_with(daemon, alpha=alpha)
                # The news is not written with the old token: the stream ends first.
                assert await stream.message() is None
            assert sid in daemon.agent_server.http.sessions


async def test_a_client_that_stops_reading_loses_its_stream_and_no_one_else_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(mcpd.agents.http.stream, "WRITE_TIMEOUT", 1.0)
    caplog.set_level(logging.INFO, logger="mcpd.http")
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path, alpha=toml_server("--tools", "2")) as daemon:
            stuck_sid, live_sid = await open_session(daemon), await open_session(daemon)
            stuck = daemon.agent_server.http.sessions[stuck_sid].news
            async with Client.open(daemon, rcvbuf=4096) as quiet, Client.open(daemon) as live:
                assert (await quiet.start("GET", stream_headers(stuck_sid)))[0] == 200
                await wait_for(lambda: stuck.streaming)
                # What the broadcasters put for it piles up in the kernel, then in its
                # queue, which stays bounded: the rest is dropped.
                pushed = 0
                while not stuck.dropped:
                    assert pushed < 2000, "the stream never filled up"
                    stuck.send_nowait(big_notification(pushed))
                    pushed += 1
                    await trio.lowlevel.checkpoint()
                assert 0 < stuck.queued <= QUEUE_BYTES
                assert any("is not reading its event stream" in r.message for r in caplog.records)

                # Meanwhile another session is served as usual.
                call = {
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "tools/call",
                    "params": {"name": "mcp__alpha__tool1", "arguments": {"text": "on"}},
                }
                with trio.fail_after(5):
                    status, _, body = await live.request("POST", session_headers(live_sid), call)
                assert status == 200
                assert json.loads(body)["result"]["content"][0]["text"] == "tool1:on"

                await wait_for(lambda: not stuck.streaming)
                assert any(
                    "stopped reading its event stream for 1 s" in r.message for r in caplog.records
                )
                assert (
                    stuck_sid in daemon.agent_server.http.sessions
                )  # its stream went, not its session


def big_notification(n: int) -> bytes:
    params = {"level": "info", "data": f"{n}:" + "x" * 60_000}
    return rpc.encode_notification("notifications/message", params)


async def test_a_sessions_log_level_brings_its_servers_log_messages_to_its_stream(
    tmp_path: Path,
) -> None:
    logging_server = Path(__file__).parents[3] / "support" / "servers" / "logging_server.py"
    server = f"command = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(logging_server))}]\n"
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path, scribe=server) as daemon:
            sid = await open_session(daemon)
            async with Client.open(daemon) as stream, Client.open(daemon) as other:
                assert (await stream.start("GET", stream_headers(sid)))[0] == 200
                level = {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel"}
                level["params"] = {"level": "info"}  # type: ignore[assignment]
                status, _, body = await other.request("POST", session_headers(sid), level)
                assert status == 200 and json.loads(body)["result"] == {}
                call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call"}
                call["params"] = {"name": "mcp__scribe__note", "arguments": {"n": 1}}  # type: ignore[assignment]
                status, _, body = await other.request("POST", session_headers(sid), call)
                assert status == 200 and "noted" in body.decode()
                # What the server logged while it served the call reaches the session.
                while True:
                    message = await stream.message()
                    assert message is not None, "the stream ended without the log message"
                    if message.get("method") != "notifications/message":
                        continue
                    data = message["params"]["data"]
                    if isinstance(data, dict) and data.get("serving") == "note":
                        assert data["arguments"] == {"n": 1}
                        break


def logging_server() -> str:
    script = Path(__file__).parents[3] / "support" / "servers" / "logging_server.py"
    return f"command = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(script))}]\n"


async def test_a_session_no_stream_reads_holds_its_servers_large_logs_to_a_bound(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path, scribe=logging_server()) as daemon:
            sid = await open_session(daemon)
            news = daemon.agent_server.http.sessions[sid].news
            async with Client.open(daemon) as c:
                level = {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel"}
                level["params"] = {"level": "info"}  # type: ignore[assignment]
                assert (await c.request("POST", session_headers(sid), level))[0] == 200
                # Each call's arguments come back in a log message of the server's: 30
                # of 200 kB each, and no GET stream ever opens to take them.
                for n in range(30):
                    call = {"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call"}
                    note = {"n": n, "pad": "x" * 200_000}
                    call["params"] = {"name": "mcp__scribe__note", "arguments": note}  # type: ignore[assignment]
                    status, _, body = await c.request("POST", session_headers(sid), call)
                    assert status == 200 and "noted" in body.decode()
            held = list(news._queue)
            assert sum(map(len, held)) <= QUEUE_BYTES
            assert news.queued == sum(map(len, held))
            assert news.dropped > 0
            # What came first waits; what did not fit was dropped.
            first_call = next(m for m in held if b'"pad"' in m)
            assert json.loads(first_call)["params"]["data"]["arguments"]["n"] == 0


async def test_a_sessions_queue_keeps_news_once_and_drops_what_passes_its_bytes(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with daemon_with(tmp_path, alpha=toml_server()) as daemon:
            news = daemon.agent_server.http.sessions[await open_session(daemon)].news
            changed = rpc.encode_notification("notifications/tools/list_changed")
            news.send_nowait(changed)
            news.send_nowait(bytes(changed))  # the same news, another copy of it
            assert list(news._queue) == [changed] and news.dropped == 0

            third = QUEUE_BYTES // 3
            big = [log_of(n, third) for n in range(3)]
            for message in big:
                news.send_nowait(message)
            assert list(news._queue) == [changed, big[0], big[1]]
            assert news.dropped == 1 and news.queued == len(changed) + len(big[0]) + len(big[1])

            assert await news.next() == changed
            news.send_nowait(changed)  # no longer waiting: news again
            assert list(news._queue) == [big[0], big[1], changed]
            taken = await news.next()
            news.put_back(taken)
            news.put_back(big[1])  # waiting already: not twice
            assert list(news._queue) == [big[0], big[1], changed]
            while news._queue:
                await news.next()
            assert news.queued == 0

            # A message over the bound alone still goes to an empty queue.
            huge = log_of(9, QUEUE_BYTES + 1)
            news.send_nowait(huge)
            assert list(news._queue) == [huge]
            news.close()
            assert news.queued == 0 and not news._queue


def log_of(n: int, size: int) -> bytes:
    return rpc.encode_notification(
        "notifications/message", {"level": "info", "data": f"{n}" + "y" * size}
    )
