"""The old HTTP+SSE transport through the whole daemon, against real servers that
speak it: the v1 Python SDK's FastMCP in SSE mode, and mcp-proxy's /sse.

An agent on the socket sees their tools, calls them with progress, and keeps working
after the event stream is cut and after the server is killed and started again on
the same port. A server configured as Streamable HTTP that only speaks the old
transport is found out and used the old way.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.hosts.third_party import peer_server, relay
from tests.support.hosts.wiretap import free_port

pytestmark = pytest.mark.interop

LIMIT = 90


def text(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result["content"])


async def state_of(agent: Any, alias: str) -> str:
    status = await agent.result("mcpd/status")
    return next(s["state"] for s in status["servers"] if s["alias"] == alias)  # type: ignore[no-any-return]


async def restarts_of(agent: Any, alias: str) -> int:
    status = await agent.result("mcpd/status")
    return next(s["restarts"] for s in status["servers"] if s["alias"] == alias)  # type: ignore[no-any-return]


async def until_ready(agent: Any, alias: str) -> None:
    while await state_of(agent, alias) != "ready":
        await trio.sleep(0.05)


@pytest.mark.parametrize(
    ("peer", "transport"),
    [("sdk1", None), ("mcp-proxy", "sse"), ("mcp-proxy", "http")],
    ids=["sdk1-by-url", "proxy-configured-sse", "proxy-found-out"],
)
async def test_discovery_calls_progress_and_a_cut_stream(
    tmp_path: Path, peer: str, transport: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(LIMIT), caplog.at_level(logging.INFO, "mcpd"):
        async with peer_server(peer) as server, relay(server.port) as cut:
            entry: dict[str, Any] = {"url": cut.url("/sse")}
            if transport is not None:
                entry["transport"] = transport
            cfg = make_config(tmp_path, {"old": entry}, health_interval=0)
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                names = sorted(t["name"] for t in await agent.tools())
                assert names == ["mcp__old__count_up", "mcp__old__nap", "mcp__old__shout"]
                status = await agent.result("mcpd/status")
                row = next(s for s in status["servers"] if s["alias"] == "old")
                assert (row["state"], row["transport"], row["era"]) == ("ready", "sse", "legacy")
                # Both accept the newest legacy version over the old transport too.
                assert row["protocol_version"] == "2025-11-25"
                assert text(await agent.call("mcp__old__shout", {"text": "hi"})) == "HI"
                reply = await agent.rpc(
                    "tools/call",
                    {
                        "name": "mcp__old__count_up",
                        "arguments": {"steps": 3},
                        "_meta": {"progressToken": "p1"},
                    },
                )
                assert text(reply["result"]) == "counted 3"
                progress = [
                    n for n in agent.notifications if n["method"] == "notifications/progress"
                ]
                assert [n["params"]["progress"] for n in progress] == [1, 2, 3]
                assert all(n["params"]["progressToken"] == "p1" for n in progress)
                # Every connection so far goes through the relay: cut them all, the
                # event stream with them. The outage may be over before a status request
                # could see it: wait for the reconnection to be counted instead.
                before = await restarts_of(agent, "old")
                cut.cut_all()
                while await restarts_of(agent, "old") == before:
                    await trio.sleep(0.02)
                await until_ready(agent, "old")
                assert text(await agent.call("mcp__old__shout", {"text": "again"})) == "AGAIN"
    switched = [r.getMessage() for r in caplog.records if "using that" in r.getMessage()]
    if transport == "http":
        assert switched == [
            "speaks the old HTTP+SSE transport (2024-11-05), not Streamable HTTP; using that"
        ]
    else:
        assert switched == []


@pytest.mark.parametrize("peer", ["sdk1", "mcp-proxy"])
async def test_a_server_restart_is_survived(tmp_path: Path, peer: str) -> None:
    port = free_port()
    cfg = make_config(tmp_path, {"old": {"url": f"http://127.0.0.1:{port}/sse"}}, health_interval=0)
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            async with peer_server(peer, port):
                await until_ready(agent, "old")
                assert text(await agent.call("mcp__old__shout", {"text": "one"})) == "ONE"
            # The server is gone: its tools stay listed, marked, and calls say so.
            while await state_of(agent, "old") == "ready":
                await trio.sleep(0.02)
            down = await agent.call("mcp__old__shout", {"text": "two"})
            assert down["isError"] is True and "old" in text(down)
            async with peer_server(peer, port):
                await until_ready(agent, "old")
                assert text(await agent.call("mcp__old__shout", {"text": "three"})) == "THREE"
