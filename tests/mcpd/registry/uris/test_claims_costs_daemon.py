"""What hostile servers' templates and results, and a hostile agent's reads, cost a
running daemon: one result's links cost at most one result's budget, whatever the
server sends; an agent reading costly URIs by the hundred waits for its own share of
matching while another agent is served."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.registry.uris.claims import RESULT_STEPS
from tests.support.clients.agent import META, Agent, make_config, two_agents

SERVER = str(Path(__file__).resolve().parents[3] / "support" / "uris" / "link_server.py")


def server(shape: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [SERVER, shape]}


async def call(agent: Agent, alias: str) -> dict[str, Any]:
    return await agent.result("tools/call", {"name": f"mcp__{alias}__link", "arguments": {}})


@pytest.mark.parametrize("shape", ["long-links", "many-templates"])
async def test_a_hostile_result_costs_one_budget_beside_a_good_server(
    tmp_path: Path, shape: str
) -> None:
    cfg = make_config(tmp_path, {"evil": server(shape), "good": server("good")})
    with trio.fail_after(120):
        async with two_agents(cfg) as (daemon, agent, other):
            table = daemon.catalog.resources
            got: dict[str, dict[str, Any]] = {}

            async def ask(who: Agent, alias: str) -> None:
                got[alias] = await call(who, alias)

            before = table.routes.match_steps
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask, agent, "evil")
                nursery.start_soon(ask, other, "good")
            # Two results, each within its budget, however many links the server sent.
            assert table.routes.match_steps - before <= 2 * RESULT_STEPS
            assert got["good"]["content"][0] == {"type": "text", "text": "ok"}
            uris = [block["uri"] for block in got["evil"]["content"]]
            # Each link reads back from its server, in the form it was handed over.
            assert all(u.startswith("mcpd://evil/") for u in uris[-10:])
            for uri in {uris[0], uris[-1]}:
                read = await agent.result("resources/read", {"uri": uri})
                assert read["contents"][0]["text"].startswith(f"{shape} read ")
        daemon.stop()


COSTLY = "e://" + "a" * 8000


async def test_an_agent_reading_costly_uris_waits_while_another_is_served(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"evil": server("long-links"), "good": server("good")})
    with trio.fail_after(120):
        async with two_agents(cfg) as (daemon, hog, other):
            await call(other, "good")
            # 120 reads at once, as one write: each URI is costly to match.
            flood = b"".join(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": f"flood-{i}",
                        "method": "resources/read",
                        "params": {"uri": f"{COSTLY}{i}", "_meta": META},
                    }
                ).encode()
                + b"\n"
                for i in range(120)
            )
            await hog.stream.send_all(flood)
            await hog.wait_unmatched(2)  # the flood is being matched
            await call(other, "good")
            # The other agent was answered before the flooding one had twenty replies: the
            # rest of the flood waits for the flooding agent's own share of matching.
            assert len(hog.unmatched) < 20
            # What the flooding agent is told: no server was found for the URI in time.
            error = hog.unmatched[0]["error"]
            assert "steps of matching a URI may take" in error["message"]
            assert "mcpd://SERVER/" in error["message"]
        daemon.stop()
