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

from mcpd.config.model import NamingConfig
from mcpd.config.servertable import ToolsConfig
from mcpd.registry.catalog import Catalog
from mcpd.registry.curation import ToolBudget, curate
from protocol import jsonrpc as rpc
from protocol import mcp
from tests.support.agent import connect, make_config, running
from tests.support.procs import scripted


def tool(name: str, description: str = "") -> mcp.Tool:
    data = {"name": name, "description": description or f"does {name}"}
    return msgspec.json.decode(json.dumps(data).encode(), type=mcp.Tool)


def tools(*names: str) -> list[mcp.Tool]:
    return [tool(n) for n in names]


def names(registry: Catalog) -> list[str]:
    return [e.local for e in registry.entries()]


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


def test_a_rename_onto_another_tools_name_is_ignored() -> None:
    curated = curate(tools("a", "b"), ToolsConfig(rename={"a": "b"}))
    assert sorted(curated.tools) == ["a", "b"]
    assert curated.originals == {}
    # A swap takes no name another tool keeps.
    curated = curate(tools("a", "b"), ToolsConfig(rename={"a": "b", "b": "a"}))
    assert curated.originals == {"b": "a", "a": "b"}


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
