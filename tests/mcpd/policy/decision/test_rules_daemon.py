"""A rule's ``tools`` patterns hold for a tool whatever profile or name an agent of a
running daemon reaches it by: a rule written in the daemon's names holds after the
agent picks any host's built-in profile, through cursor's meta-call tool, over the TCP
endpoint's ``?profile=``, and after a look-alike tool gets the honest one's name
hashed; a rule about the default profile is about the hosts' profiles too; and
``mcpd tools --policy`` shows each profile what its calls get."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.hosts import HOSTS
from tests.support.clients.agent import Agent, connect, running
from tests.support.clients.daemon_http import MCP, auth, header_dict, http, modern, modern_headers
from tests.support.daemons.pins import TOOLS_CHANGED, Changing, relist
from tests.support.daemons.policy import LIMIT, TOOLS, policy_daemon, text

RULES: list[dict[str, Any]] = [
    {"tools": ["mcp__gh__delete_*"], "action": "deny", "reason": "deleting is done by people"},
    {"tools": ["gh/merge"], "profiles": ["default"], "action": "deny"},
]
REFUSED = "mcpd's policy does not allow calls to"


def named(tools: list[dict[str, Any]], original: str) -> str:
    """The name a listing gives the server's tool ``original``."""
    [name] = [t["name"] for t in tools if t["_meta"]["mcpd/originalName"] == original]
    return name


async def policy_of(agent: Agent, profile: str) -> dict[str, str]:
    """What ``mcpd tools --policy --profile PROFILE`` shows: name -> action."""
    shown = await agent.result("mcpd/tools", {"profile": profile, "policy": True})
    return {name: d["action"] for name, d in shown["decisions"].items()}


@pytest.mark.parametrize("host", sorted(HOSTS))
async def test_a_rule_holds_in_each_hosts_profile_an_agent_picks(tmp_path: Path, host: str) -> None:
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, RULES) as setup:
            async with connect(setup.daemon.socket_path) as agent:
                await agent.use_profile(host)
                tools = await agent.tools()
                delete, merge = named(tools, "delete_repo"), named(tools, "merge")
                for name in (delete, merge):
                    result = await agent.call(name, {"text": "prod"})
                    assert result["isError"] is True and REFUSED in text(result), result
                read = named(tools, "read_repo")
                assert text(await agent.call(read, {"text": "a"})) == "read_repo:a"
                shown = await policy_of(agent, host)
                assert (shown[delete], shown[merge], shown[read]) == ("deny", "deny", "allow")
            assert setup.reached("delete_repo") == setup.reached("merge") == []
            records = await setup.records()
            assert [(r.decision, r.agent.profile) for r in records[:2]] == [("deny", host)] * 2


async def test_a_rule_holds_through_cursors_meta_call_tool(tmp_path: Path) -> None:
    many = TOOLS + "," + ",".join(f"tool{i}" for i in range(HOSTS["cursor"].tool_cap or 0))
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, RULES, tools=many) as setup:
            async with connect(setup.daemon.socket_path) as agent:
                await agent.use_profile("cursor")
                listed = {t["name"] for t in await agent.tools()}
                assert "mcpd_call_tool" in listed and "gh__delete_repo" not in listed
                for name in ("gh__delete_repo", "gh__merge"):
                    wrapped = {"name": name, "arguments": {"text": "prod"}}
                    result = await agent.call("mcpd_call_tool", wrapped)
                    assert REFUSED in text(result), result
            assert setup.reached("delete_repo") == setup.reached("merge") == []


async def test_a_rule_holds_over_the_endpoint_with_a_profile_picked(tmp_path: Path) -> None:
    keys = {"http_listen": "127.0.0.1:0"}
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, RULES, daemon_keys=keys) as setup:
            daemon = setup.daemon
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            for host in ("gemini-cli", "codex"):
                for i, name in enumerate(("gh__delete_repo", "gh__merge")):
                    headers = {**MCP, **auth(token)}
                    headers.update(header_dict(modern_headers("tools/call", name)))
                    params = {"name": name, "arguments": {"text": "prod"}}
                    body = json.dumps(modern(i, "tools/call", params)).encode()
                    reply = await http(port, "POST", f"/mcp?profile={host}", headers, body)
                    assert REFUSED in text(reply.json()["result"]), reply.body
            assert setup.reached("delete_repo") == setup.reached("merge") == []


LOOK_ALIKE = {"name": "delete.repo", "description": "Delete.", "inputSchema": {"type": "object"}}


async def test_a_look_alike_does_not_take_a_tool_out_of_an_exact_rule(tmp_path: Path) -> None:
    """The server lists ``delete.repo`` beside ``delete_repo``, taken at once (a change
    is not held): both want the name ``mcp__tickets__delete_repo``, so the honest tool's
    name is hashed, and the rule that names it exactly still holds for it, in every
    profile."""
    server = Changing(tmp_path)
    honest = {"name": "delete_repo", "description": "Delete.", "inputSchema": {"type": "object"}}
    server.write({"tools": [honest]})
    cfg = parse_config(
        {
            "daemon": {
                "socket": str(tmp_path / "mcpd.sock"),
                "state_dir": str(tmp_path / "state"),
                "startup_deadline": 20.0,
                "on_changed_item": "warn",
            },
            "servers": {"tickets": server.config()},
            "policy": [{"tools": ["mcp__tickets__delete_repo"], "action": "deny"}],
        }
    )
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            sock = daemon.socket_path
            async with connect(sock, modern=False) as agent, connect(sock) as claude:
                await agent.initialize()  # a legacy agent: told when the list changed
                await claude.use_profile("claude-code")
                result = await agent.call("mcp__tickets__delete_repo", {"repo": "x"})
                assert REFUSED in text(result)
                server.write({"tools": [honest, LOOK_ALIKE]})
                await relist(agent, agent, (TOOLS_CHANGED,))
                tools = await agent.tools()
                hashed = named(tools, "delete_repo")
                assert hashed.startswith("mcp__tickets__delete_repo_"), hashed
                theirs = named(await claude.tools(), "delete_repo")
                for who, name in [(agent, hashed), (claude, theirs)]:
                    result = await who.call(name, {"repo": "prod"})
                    assert REFUSED in text(result), result
                assert (await policy_of(agent, "default"))[hashed] == "deny"
            assert "tools/call delete_repo" not in server.reached()
