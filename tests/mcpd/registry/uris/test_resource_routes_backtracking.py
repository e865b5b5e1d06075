"""URIs matched against servers' resource templates through a running daemon: a URI
built to make a backtracking matcher take exponential time is answered at once, from
an agent's read and from a server's resource link alike."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import Agent, make_config, two_agents

SERVER = str(Path(__file__).resolve().parents[3] / "support" / "uris" / "template_server.py")
REPO = "repo://{owner}{/path}"
# A run no expansion can end in: a backtracking matcher's time grows exponentially
# with its length, and with this one runs far past the deadline below.
HOSTILE = "repo://x" + "/" * 30 + "#"


def server(template: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [SERVER, template]}


async def read(agent: Agent, uri: str) -> dict[str, Any]:
    return await agent.rpc("resources/read", {"uri": uri})


async def test_a_hostile_uri_is_answered_at_once_from_a_read_and_a_link(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"repo": server(REPO), "wiki": server("wiki://{page}")})
    with trio.fail_after(60):
        async with two_agents(cfg) as (daemon, agent, other):
            listed = await agent.result("resources/templates/list")
            assert sorted(t["uriTemplate"] for t in listed["resourceTemplates"]) == [
                REPO,
                "wiki://{page}",
            ]
            got: dict[str, Any] = {}

            async def ask(key: str, who: Agent, method: str, params: dict[str, Any]) -> None:
                got[key] = await who.rpc(method, params)

            with trio.fail_after(10):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(ask, "read", agent, "resources/read", {"uri": HOSTILE})
                    link = {"name": "mcp__repo__link", "arguments": {"uri": HOSTILE}}
                    nursery.start_soon(ask, "link", agent, "tools/call", link)
                    nursery.start_soon(ask, "wiki", other, "resources/read", {"uri": "wiki://a"})
            # No template claims the URI, and two servers have resources: not found.
            assert got["read"]["error"]["data"] == {"uri": HOSTILE}
            # The link is handed over in the form that reads it from its server.
            [block] = got["link"]["result"]["content"]
            assert block["uri"] == f"mcpd://repo/{HOSTILE}"
            back = (await read(agent, block["uri"]))["result"]["contents"][0]
            assert back == {"uri": block["uri"], "text": f"{REPO} read {HOSTILE}"}
            assert got["wiki"]["result"]["contents"][0]["text"] == "wiki://{page} read wiki://a"
            # What the template does claim still goes to its server.
            plain = (await read(agent, "repo://x/a/b"))["result"]["contents"][0]
            assert plain["text"] == f"{REPO} read repo://x/a/b"
        daemon.stop()
