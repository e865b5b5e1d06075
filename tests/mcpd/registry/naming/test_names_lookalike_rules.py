"""A server renames its items to names agents know alike (``rm_rf`` to ``rm.rf``), and a
person approves the change: every rule and filter that named an item by
``ALIAS/NAME`` still holds for it, through a running daemon (a policy rule, a
server's hidden tools, a profile's tools and prompts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from mcpd.config.loading.load import parse_config
from tests.support.clients.agent import connect, running
from tests.support.daemons.pins import TOOLS_CHANGED, Changing, cli, relist

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
    return parse_config(
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


def deploys(*names: str) -> dict[str, Any]:
    made = [*names, "read"]
    return {"tools": [{"name": n, "description": f"{n}.", "inputSchema": OBJ} for n in made]}


async def test_an_allow_naming_one_tool_lets_none_of_its_look_alikes_through(
    tmp_path: Path,
) -> None:
    """``deploy_prod`` is allowed before a deny of its whole server, and a profile
    allows it alone; the server then lists ``deploy.prod`` and ``deploy prod`` beside
    it, which agents know alike (a change only warned of): they are denied, and the
    profile lists neither."""
    server = Changing(tmp_path)
    server.write(deploys("deploy_prod"))
    cfg = parse_config(
        {
            "daemon": {
                "socket": str(tmp_path / "mcpd.sock"),
                "state_dir": str(tmp_path / "state"),
                "startup_deadline": 20.0,
            },
            "servers": {"s": server.config(on_changed_item="warn")},
            "profiles": {"narrow": {"servers": ["s"], "tools": {"allow": ["s/deploy_prod"]}}},
            "policy": [
                {"tools": ["s/deploy_prod"], "action": "allow"},
                {"servers": ["s"], "action": "deny"},
            ],
        }
    )
    with trio.fail_after(60):
        async with running(cfg):
            pass  # the server and its tools are approved as first seen
        server.write(deploys("deploy_prod", "deploy.prod", "deploy prod"))
        async with running(cfg) as daemon:
            sock = daemon.socket_path
            async with connect(sock) as agent, connect(sock) as narrow:
                await narrow.use_profile("narrow")
                local = {t["_meta"]["mcpd/originalName"]: t["name"] for t in await agent.tools()}
                assert {"deploy_prod", "deploy.prod", "deploy prod"} <= set(local)
                assert (await agent.call(local["deploy_prod"])).get("isError") is not True
                for look_alike in ("deploy.prod", "deploy prod"):
                    result = await agent.call(local[look_alike])
                    assert result["isError"] is True, result
                    assert REFUSED in result["content"][0]["text"]
                    assert (await policy_of(agent))[local[look_alike]] == "deny"
                assert [t["name"] for t in await narrow.tools()] == [local["deploy_prod"]]
    called = [line for line in server.reached() if line.startswith("tools/call")]
    assert called == ["tools/call deploy_prod"], called
