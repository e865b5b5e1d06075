"""Errata published after 2026-07-28, both ways: ``clientInfo`` is optional, a server
may say who it is in any result's ``_meta``, and list results carry ``cacheScope``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import META, connect, make_config, running
from tests.support.http_servers.serving import Responder, SeenRequest, serve_http

WHO = {"name": "late-intro", "version": "4.5.6"}


async def quiet_about_itself(req: SeenRequest, respond: Responder) -> None:
    """A modern server whose discover says nothing of who it is; its tools/list does."""
    msg = req.message
    if "id" not in msg:
        await respond.reply(202)
        return
    value: dict[str, Any] = {"resultType": "complete"}
    if msg["method"] == "server/discover":
        value |= {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
        value |= {"ttlMs": 0, "cacheScope": "private"}
    else:
        schema = {"type": "object"}
        value |= {"tools": [{"name": "t", "inputSchema": schema}], "ttlMs": 0}
        value |= {"cacheScope": "private", "_meta": {"io.modelcontextprotocol/serverInfo": WHO}}
    await respond.json({"jsonrpc": "2.0", "id": msg["id"], "result": value})


async def test_server_identity_from_a_results_meta_and_its_cache_scope(tmp_path: Path) -> None:
    async with serve_http(quiet_about_itself) as http:
        cfg = make_config(tmp_path, {"late": {"url": http.url()}})
        with trio.fail_after(30):
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                status = await agent.result("mcpd/status")
                (row,) = status["servers"]
                assert row["server_info"] == WHO
                assert row["list_cache_scope"] == "private"
                # mcpd's own list is for this agent's view: never to be shared.
                listed = await agent.result("tools/list")
                assert listed["cacheScope"] == "private" and listed["ttlMs"] == 0


async def test_agents_may_leave_client_info_out(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {})
    meta = {k: v for k, v in META.items() if not k.endswith("/clientInfo")}
    with trio.fail_after(30):
        async with running(cfg) as daemon:
            async with connect(daemon.socket_path) as agent:
                reply = await agent.rpc("tools/list", {"_meta": meta}, meta=False)
                assert reply["result"]["resultType"] == "complete"
            async with connect(daemon.socket_path, modern=False) as legacy:
                init = await legacy.result(
                    "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}
                )
                assert init["serverInfo"]["name"] == "mcpd"
