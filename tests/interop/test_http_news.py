"""The official SDK clients on mcpd's HTTP endpoint, in the handshake era, hear what they
would hear through the bridge: TypeScript (@modelcontextprotocol/sdk) and Python (mcp
2.x, and the 1.x line) open their session's GET stream by themselves and get
``tools/list_changed`` when a reload adds a server, and ``resources/updated`` for the
server-everything resource they subscribed to."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import mcpd.agents.http.stream
from mcpd.config.loading.load import load
from mcpd.daemon import Daemon
from tests.support.clients.agent import connect, running
from tests.support.clients.http_stream_client import (
    Client,
    open_session,
    session_headers,
    stream_headers,
)
from tests.support.hosts.peers import node_env, node_tool, v1_python
from tests.support.hosts.third_party import node, ts_probe
from tests.support.system.procs import scripted

HERE = Path(__file__).resolve().parent
URI = "demo://resource/static/document/features.md"
LIMIT = 120


def write_config(path: Path, *, notes: bool) -> None:
    servers = {"everything": (node_tool("mcp-server-everything"), ["stdio"], node_env())}
    if notes:
        command, args = scripted("--names", "jot")
        servers["notes"] = (command, list(args), {})
    text = (
        f'[daemon]\nsocket = "{path.parent / "mcpd.sock"}"\n'
        f'state_dir = "{path.parent / "state"}"\nhttp_listen = "127.0.0.1:0"\n'
        "startup_deadline = 30.0\n"
    )
    for alias, (command, args, env) in servers.items():
        text += f"\n[servers.{alias}]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"
        if env:
            pairs = ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())
            text += f"env = {{ {pairs} }}\n"
    path.write_text(text)


class Probe:
    """A client process that prints one JSON line per thing it saw."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self._buf = b""
        self.seen: list[dict[str, Any]] = []

    async def until(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line, sep, rest = self._buf.partition(b"\n")
            if sep:
                self._buf = rest
                self.seen.append(json.loads(line))
                if wanted(self.seen[-1]):
                    return self.seen[-1]
                continue
            data = await self.proc.stdout.receive_some(1 << 16)
            assert data, f"the client exited; it saw {self.seen}"
            self._buf += data


@asynccontextmanager
async def probe(argv: list[str]) -> AsyncIterator[Probe]:
    proc = await trio.lowlevel.open_process(argv, stdin=-1, stdout=-1)
    try:
        yield Probe(proc)
        assert proc.stdin is not None
        await proc.stdin.aclose()  # the client ends its session and exits
        with trio.fail_after(20):
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def client_argv(client: str, url: str, token: str) -> list[str]:
    if client == "typescript":
        return [node(), str(HERE / "ts_sdk_news.mjs"), *ts_probe()[2:], url, token, URI]
    python = sys.executable if client == "python" else v1_python()
    return [python, str(HERE / "sdk_http_news.py"), url, token, URI]


def list_changed(client: str, line: dict[str, Any]) -> bool:
    if client == "typescript":  # the SDK fetched the tools again, as a host would
        return "mcp__notes__jot" in line.get("tools", [])
    return line.get("method") == "notifications/tools/list_changed"


async def wait_for(predicate: Callable[[], bool]) -> None:
    while not predicate():
        await trio.sleep(0.02)


@pytest.mark.parametrize("client", ["typescript", "python", "python-v1"])
async def test_a_legacy_http_client_hears_a_reload_and_its_resource_updates(
    tmp_path: Path, client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if client == "typescript":
        node()
    # Keep-alive comments all along: the clients must take them in their stride.
    monkeypatch.setattr(mcpd.agents.http.stream, "KEEPALIVE", 0.2)
    path = tmp_path / "mcpd.toml"
    write_config(path, notes=False)
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            url, token = daemon.agent_server.endpoint.url, daemon.http_token()
            async with probe(client_argv(client, url, token)) as seen:
                await seen.until(lambda line: "ready" in line)
                (legacy,) = daemon.agent_server.http.sessions.values()
                runner = daemon.supervisor.servers["everything"]
                # The client opened its stream by itself, and mcpd holds its subscription.
                await wait_for(
                    lambda: legacy.news.streaming and URI in runner.prompt_resources.held
                )

                write_config(path, notes=True)
                await daemon.reload()
                await seen.until(lambda line: list_changed(client, line))

                await start_updates(daemon)
                updated = await seen.until(
                    lambda line: line.get("method") == "notifications/resources/updated"
                )
                assert updated["params"]["uri"] == URI
            assert (
                not daemon.agent_server.http.sessions
            )  # the client ended its session on the way out


async def start_updates(daemon: Daemon) -> None:
    """server-everything sends updates of subscribed resources once asked to (the first
    at once, then every 5 s); any agent may ask."""
    async with connect(daemon.socket_path, modern=False) as agent:
        await agent.initialize()
        result = await agent.call("mcp__everything__toggle-subscriber-updates")
        assert not result.get("isError"), result


async def test_what_a_server_asks_during_a_call_comes_on_that_calls_stream(
    tmp_path: Path,
) -> None:
    """With the session's GET stream open, a server's elicitation during a call still
    comes on the call's own response stream, and the answer POSTed back finishes it."""
    path = tmp_path / "mcpd.toml"
    write_config(path, notes=False)
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)) as daemon:
            sid = await open_session(daemon, capabilities={"elicitation": {}})
            async with Client.open(daemon) as stream, Client.open(daemon) as calls:
                assert (await stream.start("GET", stream_headers(sid)))[0] == 200
                news = daemon.agent_server.http.sessions[sid].news
                await wait_for(lambda: news.streaming)
                call = {
                    "jsonrpc": "2.0",
                    "id": 5,
                    "method": "tools/call",
                    "params": {"name": "mcp__everything__trigger-elicitation-request"},
                }
                status, head = await calls.start("POST", session_headers(sid), call)
                assert status == 200 and head["content-type"] == "text/event-stream"
                asked = await calls.message()
                assert asked is not None and asked["method"] == "elicitation/create"
                answer = {
                    "jsonrpc": "2.0",
                    "id": asked["id"],
                    "result": {"action": "accept", "content": {"name": "Ada", "check": True}},
                }
                async with Client.open(daemon) as reply:
                    status, _, _ = await reply.request("POST", session_headers(sid), answer)
                assert status == 202
                done = await calls.message()
                assert done is not None and done["id"] == 5
                assert "Ada" in json.dumps(done["result"])
                assert await calls.message() is None
                # Nothing of the call went to the GET stream: next there is the news.
                write_config(path, notes=True)
                await daemon.reload()
                first = await stream.message()
                assert first is not None
                assert first["method"] == "notifications/tools/list_changed"
