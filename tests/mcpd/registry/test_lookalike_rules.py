"""A server renames its items to names agents know alike (``rm_rf`` to ``rm.rf``), and a
person approves the change: every rule and filter that named an item by
``ALIAS/NAME`` still holds for it, through a running daemon (a policy rule, a
server's hidden tools, a profile's tools and prompts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from mcpd.config.load import parse
from tests.support.agent import connect, running
from tests.support.pins_daemon import TOOLS_CHANGED, Changing, cli, relist

OBJ = {"type": "object"}
PROMPTS_CHANGED = "notifications/prompts/list_changed"
REFUSED = "mcpd's policy does not allow calls to"


def items(sep: str) -> dict[str, Any]:
    def tool(name: str) -> dict[str, Any]:
        return {"name": name, "description": f"The {name} tool.", "inputSchema": OBJ}

    return {
        "tools": [tool(f"rm{sep}rf"), tool(f"drop{sep}db"), tool(f"hidden{sep}tool"), tool("ok")],
        "prompts": [{"name": f"secret{sep}prompt", "description": "A secret."}],
    }


def config(tmp_path: Path, server: Changing) -> Any:
    return parse(
        {
            "daemon": {
                "socket": str(tmp_path / "mcpd.sock"),
                "state_dir": str(tmp_path / "state"),
                "startup_deadline": 20.0,
            },
            "servers": {"tickets": server.config(tools={"deny": ["hidden_tool"]})},
            "profiles": {
                "safe": {
                    "servers": ["tickets"],
                    "tools": {"deny": ["tickets/drop_db"]},
                    "prompts": {"deny": ["tickets/secret_prompt"]},
                }
            },
            "policy": [{"tools": ["tickets/rm_rf"], "action": "deny"}],
        }
    )


async def test_rules_naming_an_item_hold_after_its_server_renames_it_to_a_look_alike(
    tmp_path: Path,
) -> None:
    server = Changing(tmp_path)
    server.write(items("_"))
    with trio.fail_after(60):
        async with running(config(tmp_path, server)) as daemon:
            sock = daemon.socket_path
            async with connect(sock, modern=False) as agent, connect(sock) as safe:
                await agent.initialize()
                await safe.use_profile("safe")
                server.write(items("."))
                await relist(agent, agent, (TOOLS_CHANGED, PROMPTS_CHANGED))
                code, out, err = await cli(sock, "approve", "tickets", "--yes")
                assert code == 0, err
                assert "+name: rm.rf" in out
                listed = {t["name"] for t in await agent.tools()}
                assert "mcp__tickets__rm_rf" in listed and "mcp__tickets__hidden_tool" not in listed
                result = await agent.call("mcp__tickets__rm_rf")
                assert result["isError"] is True and REFUSED in result["content"][0]["text"]
                hidden = await agent.rpc("tools/call", {"name": "mcp__tickets__hidden_tool"})
                assert "error" in hidden or hidden["result"]["isError"] is True, hidden
                theirs = {t["name"] for t in await safe.tools()}
                assert "mcp__tickets__ok" in theirs and "mcp__tickets__drop_db" not in theirs
                prompts = (await safe.result("prompts/list"))["prompts"]
                assert "mcp__tickets__secret_prompt" not in {p["name"] for p in prompts}
                assert (await policy_of(agent))["mcp__tickets__rm_rf"] == "deny"
    reached = server.reached()
    assert not [line for line in reached if line.startswith("tools/call") and "relist" not in line]


async def policy_of(agent: Any) -> dict[str, str]:
    shown = await agent.result("mcpd/tools", {"profile": "default", "policy": True})
    return {name: d["action"] for name, d in shown["decisions"].items()}
