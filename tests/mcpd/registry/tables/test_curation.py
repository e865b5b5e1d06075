"""Tool curation (allow/deny, rename, description), the max_tools warning and per-tool
timeouts: in the registry alone, and end to end through a real daemon."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import DEFAULT_POLICY, Handling, NamingConfig
from mcpd.config.tables.policy import PolicyRule
from mcpd.config.tables.servertable import ToolsConfig
from mcpd.policy.decision.rules import Policy, facts_of
from mcpd.registry.gating.gate import ListGate
from mcpd.registry.tables.catalog import Catalog
from mcpd.registry.tables.curation import ToolBudget, curate, lets_through
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.pins import TOOLS_CHANGED, Changing, by_name, relist
from tests.support.system.procs import scripted


def tool(name: str, description: str = "") -> mcp.Tool:
    data = {"name": name, "description": description or f"does {name}"}
    return msgspec.json.decode(json.dumps(data).encode(), type=mcp.Tool)


def tools(*names: str) -> list[mcp.Tool]:
    return [tool(n) for n in names]


def names(registry: Catalog) -> list[str]:
    return [e.local for e in registry.entries()]


OBJ = {"type": "object"}
REASON = "purging is for people"
PROMPTS_CHANGED = "notifications/prompts/list_changed"
FS = ("read_file", "read_secret_file", "list_dir", "write_file", "search")


def test_allow_then_deny_globs_pick_the_tools() -> None:
    rules = ToolsConfig(allow=["read_*", "list_*"], deny=["*secret*"])
    curated = curate(tools(*FS), rules)
    assert sorted(curated.tools) == ["list_dir", "read_file"]
    assert curated.hidden == ["read_secret_file", "search", "write_file"]
    # No allow list: everything but the denied.
    curated = curate(tools(*FS), ToolsConfig(deny=["write_*"]))
    assert sorted(curated.tools) == ["list_dir", "read_file", "read_secret_file", "search"]


def test_rename_and_description_overrides() -> None:
    rules = ToolsConfig(
        rename={"search": "find_files"}, description={"read_file": "Read a project file."}
    )
    curated = curate(tools(*FS), rules)
    assert "search" not in curated.tools
    assert curated.originals == {"find_files": "search"}
    assert curated.tools["read_file"].description == "Read a project file."


def test_a_rename_wins_over_the_servers_own_tool_of_that_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The name the operator gives is the renamed tool's: the server's own tool of that
    name is listed under another (its name and a hash), with a warning naming both."""
    with caplog.at_level(logging.WARNING, logger="mcpd.registry"):
        curated = curate(tools("a", "b"), ToolsConfig(rename={"a": "b"}), "fs")
    [other] = set(curated.tools) - {"b"}
    assert curated.tools["b"].name == "a" and curated.tools[other].name == "b"
    assert other.startswith("b_") and other != "b"
    assert curated.originals == {"b": "a", other: "b"}
    assert f"fs: the server's tool 'b' is listed as '{other}': rename gives its name to 'a'" in (
        caplog.messages
    )
    # Listed again, it gets the same name; a name the server lists itself is no other's.
    again = curate(tools("b", other, "a"), ToolsConfig(rename={"a": "b"}), "fs")
    assert again.originals["b"] == "a" and again.tools[other].name == other
    [moved] = [name for name, original in again.originals.items() if original == "b"]
    assert moved.startswith(other) and moved != other
    # A swap takes no name from anyone.
    curated = curate(tools("a", "b"), ToolsConfig(rename={"a": "b", "b": "a"}))
    assert curated.originals == {"b": "a", "a": "b"}


@pytest.mark.parametrize("changes", ["hold", "warn", "accept"])
def test_a_tool_added_under_a_renamed_tools_name_takes_neither_its_name_nor_its_rules(
    changes: Handling,
) -> None:
    """An approved server adds a tool under the name the operator gave an approved one
    (a change of it, to the pins): the approved tool keeps its name, and with it the
    rules written for that name, whatever becomes of the one added."""
    settings = DEFAULT_POLICY._replace(on_changed_item=changes, on_new_item=changes)
    registry = Catalog(NamingConfig(), ListGate(lambda alias: settings))
    registry.set_rules("h", ToolsConfig(rename={"delete_notes": "purge"}))
    registry.update("h", tools("delete_notes"))
    registry.gate.settle("h")
    registry.update("h", tools("delete_notes", "purge"))
    renamed = registry.lookup("mcp__h__purge")
    assert renamed is not None and renamed.original == "delete_notes"
    assert renamed.held is None and renamed.available
    assert registry.lookup("mcp__h__delete_notes") is None
    [added] = [e for e in registry.entries() if e.original == "purge"]
    assert added.local != "mcp__h__purge" and added.name != "purge"
    assert (added.held is not None) == (changes == "hold")
    rules = Policy([PolicyRule(tools=["mcp__h__purge"], action="deny")])
    assert rules.decide(facts_of(renamed, "default", False, None)).action == "deny"


@pytest.mark.parametrize(
    ("listed", "rename"),
    [(("deploy", "deploy.prod"), "deploy_prod"), (("search", "my.find", "my find"), "my_find")],
)
def test_a_tool_agents_would_know_by_a_renamed_tools_name_takes_neither_its_name_nor_its_rules(
    listed: tuple[str, ...], rename: str
) -> None:
    """A server's tool named unlike the operator's rename but known to agents as it
    (``deploy.prod`` beside a rename to ``deploy_prod``): the renamed tool keeps the plain
    name, and a rule allowing that name allows it alone."""
    renamed_from, *lookalikes = listed
    registry = Catalog(NamingConfig())
    registry.set_rules("b", ToolsConfig(rename={renamed_from: rename}))
    registry.update("b", tools(*listed))
    renamed = registry.lookup(f"mcp__b__{rename}")
    assert renamed is not None and renamed.original == renamed_from
    rules = Policy(
        [
            PolicyRule(tools=[f"mcp__b__{rename}"], action="allow"),
            PolicyRule(tools=["*"], action="deny"),
        ]
    )
    assert rules.decide(facts_of(renamed, "default", False, None)).action == "allow"
    others = [e for e in registry.entries() if e.original in lookalikes]
    assert sorted(e.original for e in others) == sorted(lookalikes)
    for entry in others:
        assert registry.lookup(entry.local) is entry  # still listed, under a name of its own
        assert f"mcp__b__{rename}" not in (entry.local, *entry.other_names)
        assert rules.decide(facts_of(entry, "default", False, None)).action == "deny"


def test_the_registry_lists_curated_tools_and_calls_back_by_the_servers_name() -> None:
    registry = Catalog(NamingConfig())
    registry.set_rules(
        "fs", ToolsConfig(deny=["write_*", "*secret*"], rename={"search": "find_files"})
    )
    registry.update("fs", tools(*FS))
    assert names(registry) == ["mcp__fs__find_files", "mcp__fs__list_dir", "mcp__fs__read_file"]
    entry = registry.lookup("mcp__fs__find_files")
    assert entry is not None and entry.original == "search"
    listed = msgspec.json.decode(rpc.encode(registry.listing()[0]))
    assert listed["_meta"]["mcpd/originalName"] == "search"
    # Hidden tools have no local name, so they cannot be called either.
    assert registry.lookup("mcp__fs__write_file") is None
    assert registry.lookup("mcp__fs__search") is None
    # The raw list is kept (for the state file and for new rules).
    raw = registry.raw_tools("fs")
    assert raw is not None and len(raw) == len(FS)


def test_new_rules_apply_to_the_tools_already_listed() -> None:
    registry = Catalog(NamingConfig())
    registry.update("fs", tools(*FS))
    version = registry.version
    registry.set_rules("fs", ToolsConfig(allow=["read_file"]))
    assert names(registry) == ["mcp__fs__read_file"]
    assert registry.version > version
    registry.set_rules("fs", ToolsConfig())
    assert len(names(registry)) == len(FS)


def test_the_tool_budget_warns_once_per_crossing(caplog: pytest.LogCaptureFixture) -> None:
    budget = ToolBudget(3)
    with caplog.at_level(logging.INFO, logger="mcpd.registry"):
        for count in (2, 3, 4, 5, 9, 3, 2, 4):
            budget.check(count)
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if "more than max_tools (3)" in m]) == 2
    assert len([m for m in messages if "within max_tools (3) again" in m]) == 1
    assert budget.warning(4) is not None and budget.warning(3) is None


# -- end to end --


def server(*flags: str, **extra: Any) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args), **extra}


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


async def test_filtered_tools_are_neither_listed_nor_callable(tmp_path: Path) -> None:
    fs = server(
        "--names",
        ",".join(FS),
        tools={
            "allow": ["read_*", "list_*", "search"],
            "deny": ["*secret*"],
            "rename": {"search": "find_files"},
            "description": {"read_file": "Read one file of the project."},
        },
    )
    cfg = make_config(tmp_path, {"fs": fs})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            listed = {t["name"]: t for t in await agent.tools()}
            assert sorted(listed) == [
                "mcp__fs__find_files",
                "mcp__fs__list_dir",
                "mcp__fs__read_file",
            ]
            assert (
                listed["mcp__fs__read_file"]["description"] == "[fs] Read one file of the project."
            )
            # The renamed tool reaches the server under the server's own name.
            result = await agent.call("mcp__fs__find_files", {"text": "q"})
            assert text(result) == "search:q"
            for hidden in ("mcp__fs__write_file", "mcp__fs__read_secret_file", "mcp__fs__search"):
                result = await agent.call(hidden, {"text": "q"})
                assert result["isError"] is True
                assert "Unknown tool" in text(result)


async def test_a_tool_timeout_overrides_the_servers(tmp_path: Path) -> None:
    slow = server("--slow", "0.5", call_timeout=0.2, tool_timeouts={"tool1": 10})
    cfg = make_config(tmp_path, {"slow": slow})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            timed_out = await agent.call("mcp__slow__tool0", {"text": "a"})
            assert timed_out["isError"] is True
            assert "no answer within 0.2" in text(timed_out)
            done = await agent.call("mcp__slow__tool1", {"text": "b"})
            assert text(done) == "tool1:b"


async def test_status_warns_when_the_list_passes_max_tools(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"many": server("--tools", "5")}, max_tools=4)
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            status = await agent.result("mcpd/status")
            assert status["daemon"]["max_tools"] == 4
            assert status["daemon"]["warnings"] == [
                "5 tools is more than max_tools (4); some hosts refuse that many"
            ]


async def test_an_item_added_under_a_renamed_items_name_leaves_its_rules_in_force(
    tmp_path: Path,
) -> None:
    """The operator renamed an approved tool and prompt, and wrote a profile's deny and a
    policy rule for their new names; the server then lists a tool and a prompt under
    those names. The approved ones keep the names and stay behind the rules: the
    profile still does not list them, and a call still meets the deny."""
    server = Changing(tmp_path)
    first = {
        "tools": [{"name": "delete_notes", "description": "Delete notes.", "inputSchema": OBJ}],
        "prompts": [{"name": "daily", "description": "Plan the day."}],
    }
    server.write(first)
    added = {
        "tools": [*first["tools"], {"name": "purge", "description": "x", "inputSchema": OBJ}],
        "prompts": [*first["prompts"], {"name": "plan", "description": "y"}],
    }
    entry = server.config(tools={"rename": {"delete_notes": "purge"}})
    entry["prompts"] = {"rename": {"daily": "plan"}}
    config = parse_config(
        {
            "daemon": {
                "socket": str(tmp_path / "mcpd.sock"),
                "state_dir": str(tmp_path / "state"),
                "startup_deadline": 20.0,
            },
            "servers": {"tickets": entry},
            "profiles": {
                "p": {"tools": {"deny": ["tickets/purge"]}, "prompts": {"deny": ["tickets/plan"]}}
            },
            "policy": [{"tools": ["mcp__tickets__purge"], "action": "deny", "reason": REASON}],
        },
        env={},
    )
    with trio.fail_after(60):
        async with running(config) as daemon:
            sock = daemon.socket_path
            async with (
                connect(sock, modern=False) as watcher,
                connect(sock) as agent,
                connect(sock) as in_p,
            ):
                await watcher.initialize()
                await in_p.use_profile("p")
                before = by_name(await agent.tools())
                assert before["mcp__tickets__purge"]["_meta"]["mcpd/originalName"] == "delete_notes"
                server.write(added)
                await relist(agent, watcher, (TOOLS_CHANGED, PROMPTS_CHANGED))
                tools = by_name(await agent.tools())
                assert tools["mcp__tickets__purge"]["_meta"]["mcpd/originalName"] == "delete_notes"
                assert "mcp__tickets__delete_notes" not in tools
                originals = {n: t["_meta"]["mcpd/originalName"] for n, t in tools.items()}
                [other] = [name for name, original in originals.items() if original == "purge"]
                assert other.startswith("mcp__tickets__purge_")
                denied = await agent.call("mcp__tickets__purge")
                assert denied["isError"] is True and REASON in text(denied)
                seen_in_p = await in_p.tools()
                assert "delete_notes" not in [t["_meta"]["mcpd/originalName"] for t in seen_in_p]
                unknown = await in_p.call("mcp__tickets__delete_notes")
                assert unknown["isError"] is True and "Unknown tool" in text(unknown)
                assert "tools/call delete_notes" not in server.reached()

                prompts = by_name((await agent.result("prompts/list"))["prompts"])
                assert prompts["mcp__tickets__plan"]["_meta"]["mcpd/originalName"] == "daily"
                assert "mcp__tickets__daily" not in prompts
                in_p_prompts = (await in_p.result("prompts/list"))["prompts"]
                assert "daily" not in [p["_meta"]["mcpd/originalName"] for p in in_p_prompts]
                for name in ("mcp__tickets__plan", "mcp__tickets__daily"):
                    got = await in_p.rpc("prompts/get", {"name": name})
                    assert "Unknown prompt" in got["error"]["message"]


def test_a_hidden_name_is_hidden_as_agents_know_it_too() -> None:
    rules = ToolsConfig(deny=["hidden_tool"])
    assert not lets_through("hidden.tool", rules) and not lets_through("hidden_tool", rules)
    assert lets_through("hidden-tool", rules)
    only = ToolsConfig(allow=["deploy_prod"])
    assert lets_through("deploy_prod", only) and not lets_through("deploy.prod", only)
