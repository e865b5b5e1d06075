"""The daemon holds a legacy HTTP server's server-push stream: what the server pushes
there (tools/list_changed) reaches the registry and the agents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.http_servers.serving import (
    LegacySession,
    Responder,
    SeenRequest,
    event,
    notification,
    result,
    serve_http,
)

LIMIT = 20


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}}


async def list_changed(agent: Agent) -> None:
    while not any(n["method"] == "notifications/tools/list_changed" for n in agent.notifications):
        agent.notified = trio.Event()
        await agent.notified.wait()


async def test_a_list_changed_on_the_push_stream_brings_the_new_tool_to_agents(
    tmp_path: Path,
) -> None:
    opened = trio.Event()
    push = trio.Event()

    async def legacy_handler(req: SeenRequest, respond: Responder) -> None:
        if req.method == "GET":
            await respond.sse_start()
            opened.set()
            await push.wait()
            await respond.send(event(notification("notifications/tools/list_changed")))
            await respond.wait_disconnect()
        elif req.rpc_method == "server/discover":
            await respond.reply(400, "Bad Request")  # a legacy server's answer to the probe
        elif req.rpc_method == "tools/call":
            name = req.message["params"]["name"]
            await respond.json(result(req.rpc_id, {"content": [{"type": "text", "text": name}]}))
        else:
            await respond.json(result(req.rpc_id, {}))

    async def modern_handler(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "server/discover":
            discovered = {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "resultType": "complete",
            }
            await respond.json(result(req.rpc_id, discovered))
        elif req.rpc_method == "tools/list":
            await respond.json(result(req.rpc_id, {"tools": [tool("gamma")]}))
        else:
            await respond.reply(405)

    legacy = LegacySession(legacy_handler, tools=[tool("alpha")])
    with trio.fail_after(LIMIT):
        async with serve_http(legacy) as old, serve_http(modern_handler) as new:
            cfg = make_config(tmp_path, {"old": {"url": old.url()}, "new": {"url": new.url()}})
            async with running(cfg) as daemon, connect(daemon.socket_path, modern=False) as agent:
                await agent.initialize()
                await opened.wait()
                names = {t["name"] for t in await agent.tools()}
                assert {"mcp__old__alpha", "mcp__new__gamma"} <= names
                assert "mcp__old__beta" not in names

                legacy.tools = [tool("alpha"), tool("beta")]
                push.set()
                await list_changed(agent)
                names = {t["name"] for t in await agent.tools()}
                assert "mcp__old__beta" in names
                done = await agent.call("mcp__old__beta")
                assert done["content"][0]["text"] == "beta"

    (get,) = [r for r in old.requests if r.method == "GET"]
    assert get.header("accept") == "text/event-stream"
    assert get.header("mcp-session-id") == "session-1"
    assert get.header("mcp-protocol-version") == "2025-11-25"
    listings = [r for r in old.requests if r.rpc_method == "tools/list"]
    assert len(listings) >= 2  # the first listing, and the one the notification asked for
    # A modern server has no push stream to ask for.
    assert [r.method for r in new.requests if r.method != "POST"] == []
