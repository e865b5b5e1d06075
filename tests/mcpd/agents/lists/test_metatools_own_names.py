"""A server listing tools named as mcpd's meta-tools, under profiles whose template is
``{tool}``: through a running daemon, in every discovery mode, its tools are listed
under hashed names beside mcpd's own (no name twice), a call by the listed name
reaches that server, and mcpd's meta-tools keep their names and still work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.daemons.pins import Changing

OBJ = {"type": "object"}
OWN = ("mcpd_search_tools", "mcpd_describe_tools", "mcpd_call_tool")
PROFILES = {
    "auto": {"template": "{tool}", "discovery": "auto"},
    "search": {"template": "{tool}", "discovery": "search", "pinned": ["*"]},
    "all": {"template": "{tool}", "discovery": "all"},
}


def server(tmp_path: Path, where: str, *names: str) -> Changing:
    home = tmp_path / where
    home.mkdir()
    out = Changing(home)
    out.write(
        {"tools": [{"name": n, "description": f"{where} {n}", "inputSchema": OBJ} for n in names]}
    )
    return out


def text(result: dict[str, Any]) -> str:
    assert result.get("isError") is not True, result
    return str(result["content"][0]["text"])


async def listed_as(agent: Agent, alias: str, original: str) -> str:
    [name] = [
        t["name"]
        for t in await agent.tools()
        if t["_meta"].get("mcpd/server") == alias
        and t["_meta"].get("mcpd/originalName") == original
    ]
    return str(name)


@pytest.mark.parametrize("profile", sorted(PROFILES))
async def test_a_servers_tool_never_takes_a_meta_tools_name(tmp_path: Path, profile: str) -> None:
    ev = server(tmp_path, "ev", "mcpd_search_tools", "mcpd_call_tool", "merge_pr")
    gh = server(tmp_path, "gh", "merge_pr")
    cfg = make_config(
        tmp_path,
        {"ev": ev.config(), "gh": gh.config()},
        profiles=PROFILES,
        state_dir=str(tmp_path / "state"),
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            await agent.use_profile(profile)
            tools = await agent.tools()
            names = [t["name"] for t in tools]
            assert len(names) == len(set(names)), names
            for t in tools:
                if t["name"] in OWN:
                    assert t["_meta"]["mcpd/server"] == "mcpd", t
            theirs = await listed_as(agent, "ev", "mcpd_call_tool")
            assert theirs.startswith("mcpd_call_tool_"), theirs
            assert text(await agent.call(theirs)) == "called mcpd_call_tool"
            assert "tools/call mcpd_call_tool" in ev.reached()
            if profile == "all":
                return
            found = await agent.call("mcpd_search_tools", {"query": "merge"})
            assert "merge_pr" in text(found)
            merge = await listed_as(agent, "gh", "merge_pr")
            through = await agent.call("mcpd_call_tool", {"name": merge})
            assert text(through) == "called merge_pr"
            assert "tools/call merge_pr" in gh.reached()
            assert "tools/call merge_pr" not in ev.reached()
