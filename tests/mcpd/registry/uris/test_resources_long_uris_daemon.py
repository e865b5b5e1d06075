"""A server listing URIs as long as its list may hold, under a profile's ``resources``
patterns: those past the bound of one (``MAX_URI``) or of a list's in all are left out
with the reason ``mcpd status`` gives, the rest judged and listed, while another agent
is served."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

from mcpd.registry.gating.limits import LISTED_URI_CHARS, LONG_URI, URIS_FULL
from protocol.mcp.uri_templates import MAX_URI
from tests.support.clients.agent import Agent, make_config, two_agents

SERVER = str(Path(__file__).resolve().parents[3] / "support" / "uris" / "link_server.py")
DENY = {"default": {"resources": {"deny": ["*/file:///etc/*"]}}}


def server(shape: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [SERVER, shape]}


async def listed(agent: Agent) -> list[str]:
    uris: list[str] = []
    cursor = None
    while True:
        page = await agent.result("resources/list", {"cursor": cursor} if cursor else None)
        uris += [r["uri"] for r in page["resources"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            return uris


async def test_long_uris_under_a_deny_pattern_leave_another_agent_served(
    tmp_path: Path,
) -> None:
    servers = {"evil": server("long-uris"), "good": server("good")}
    cfg = make_config(tmp_path, servers, profiles=DENY)
    with trio.fail_after(120):
        async with two_agents(cfg) as (daemon, agent, other):
            got: dict[str, Any] = {}

            async def lists() -> None:
                got["uris"] = await listed(agent)

            async def asks() -> None:
                got["status"] = await other.result("mcpd/status")
                got["call"] = await other.call("mcp__good__link")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(lists)
                nursery.start_soon(asks)
            assert got["call"]["content"][0] == {"type": "text", "text": "ok"}
            uris = got["uris"]
            climbing = [u for u in uris if u.startswith("file:///%2e")]
            fit = LISTED_URI_CHARS // len(climbing[0])
            assert len(climbing) == fit and max(len(u) for u in uris) <= MAX_URI
            assert "file:///evil.md" in uris and "file:///etc/passwd" not in uris
            status = {s["alias"]: s for s in got["status"]["servers"]}["evil"]
            dropped = status["dropped_resources"]
            assert sum(LONG_URI in why for why in dropped) == 20
            assert sum(why.endswith(URIS_FULL) for why in dropped) == 300 - fit
            assert [LONG_URI in why for why in status["dropped_resource_templates"]] == [True]
        daemon.stop()
