"""In a running daemon, one agent subscribing to an ``mcpd://`` URI a 2026-07-28
server does not have (which it refuses in the one listen mcpd holds there) and
leaving costs the other agents nothing: the honest agent's updates still come, and so
do those of an agent that subscribes afterwards."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from tests.support.clients.agent import Agent, connect, make_config, running

SERVER = str(Path(__file__).resolve().parents[3] / "support" / "servers" / "listen_refusing.py")
HONEST = "file:///m/x"
LATER = "file:///m/y"
UPDATED = "notifications/resources/updated"


def updates(agent: Agent) -> list[str]:
    return [m["params"]["uri"] for m in agent.notifications if m["method"] == UPDATED]


async def touch(toucher: Agent, uri: str) -> None:
    """Once a listen naming ``uri`` is open at the server, its update told on it."""
    result = await toucher.call("mcp__m__touch", {"uri": uri})
    assert result["content"][0]["text"] == "told 1"


async def test_an_agents_bad_uri_ends_no_other_agents_updates(tmp_path: Path) -> None:
    servers = {"m": {"command": sys.executable, "args": [SERVER, f"{HONEST},{LATER}"]}}
    with trio.fail_after(30):
        async with (
            running(make_config(tmp_path, servers)) as daemon,
            connect(daemon.socket_path, modern=False) as honest,
        ):
            await honest.initialize()
            await honest.result("resources/subscribe", {"uri": HONEST})
            await touch(honest, HONEST)
            await honest.result("ping")  # answered: the update came before it
            assert updates(honest) == [HONEST]
            async with connect(daemon.socket_path, modern=False) as hostile:
                await hostile.initialize()
                bogus = {"uri": "mcpd://m/file:///m/nope"}
                assert await hostile.result("resources/subscribe", bogus) == {}
                refusals = await hostile.call("mcp__m__refusals")
                assert refusals["content"][0]["text"] == "refused 1"
                assert await hostile.result("resources/unsubscribe", bogus) == {}
            await touch(honest, HONEST)
            await honest.result("ping")
            assert updates(honest) == [HONEST, HONEST]
            async with connect(daemon.socket_path, modern=False) as later:
                await later.initialize()
                await later.result("resources/subscribe", {"uri": LATER})
                await touch(later, LATER)
                await later.result("ping")
                assert updates(later) == [LATER]
