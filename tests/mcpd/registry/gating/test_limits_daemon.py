"""Through a running daemon: a server that lists far more than any real one is held to
its limits before agents, the registry or the state file see it; ``mcpd status`` (text
and JSON) and the log say what was dropped or cut and why; other servers are untouched."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.local.state.statefile import FILE_NAME
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.system.procs import scripted

LONG = 200 * 1024  # bytes of tool0's description, in three-byte characters
KEPT = 65_535  # of them within 64 KiB: the character that 65,536 cuts in two is left out
INSTRUCTIONS = 300_000
FLOOD = (
    "--tools", "2500", "--prompts", "2100", "--templates", "2300", "--page-size", "1500",
    "--long-description", str(LONG), "--long-instructions", str(INSTRUCTIONS), "--utf8",
)  # fmt: skip


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


async def every(agent: Agent, method: str, key: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = await agent.result(method, {"cursor": cursor} if cursor else None)
        out += page[key]
        cursor = page.get("nextCursor")
        if cursor is None:
            return out


def by_server(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        out.setdefault(item["_meta"]["mcpd/server"], []).append(item)
    return out


async def cli(*args: str, socket: str) -> str:
    done = await trio.run_process(
        [sys.executable, "-m", "mcpd", *args, "--socket", socket],
        capture_stdout=True,
        capture_stderr=True,
    )
    return done.stdout.decode()


async def test_a_flooding_server_is_held_to_the_limits_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = make_config(
        tmp_path,
        {"flood": server(*FLOOD), "calm": server("--tools", "3", "--prompts", "2")},
        state_dir=str(tmp_path / "state"),
    )
    with trio.fail_after(120), caplog.at_level(logging.WARNING, "mcpd"):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            tools = by_server(await agent.tools())
            assert len(tools["flood"]) == 2000
            assert [t["name"] for t in tools["calm"]] == [f"mcp__calm__tool{i}" for i in range(3)]
            assert [t["description"] for t in tools["calm"]] == [
                f"[calm] test tool {i}" for i in range(3)
            ]
            described = {t["name"]: t["description"] for t in tools["flood"]}
            assert described["mcp__flood__tool0"] == (
                "[flood] "
                + "\u20ac" * (KEPT // 3)
                + f" [mcpd: cut at 65,536 of {LONG - 2:,} bytes]"
            )
            assert described["mcp__flood__tool1999"] == "[flood] test tool 1999"
            assert "mcp__flood__tool2000" not in described
            prompts = by_server(await every(agent, "prompts/list", "prompts"))
            assert (len(prompts["flood"]), len(prompts["calm"])) == (2000, 2)
            templates = await every(agent, "resources/templates/list", "resourceTemplates")
            assert len(templates) == 2000

            # What a model reads of the server: its lists are partly shown, its
            # instructions cut.
            said = (await agent.result("server/discover"))["instructions"]
            assert (
                "[mcpd] The server 'flood' says:\n[mcpd] Of 'flood': this server lists more "
                "tools, prompts, resource templates than mcpd's limits allow; only the first "
                "ones are shown.\n> iii"
            ) in said

            status = json.loads(await cli("status", "--json", socket=daemon.socket_path))
            rows = {s["alias"]: s for s in status["servers"]}
            flood, calm = rows["flood"], rows["calm"]
            assert flood["tools"] == 2000 and flood["prompts"] == 2000
            assert flood["dropped_tools"] == [
                "500 tools past the first 2,000 dropped (daemon.max_list_items)"
            ]
            assert flood["dropped_prompts"] == [
                "100 prompts past the first 2,000 dropped (daemon.max_list_items)"
            ]
            assert flood["dropped_resource_templates"] == [
                "300 resource templates past the first 2,000 dropped (daemon.max_list_items)"
            ]
            assert flood["dropped_resources"] == []
            assert flood["cut"] == [
                f"tool tool0: description cut at 65,536 of {LONG - 2:,} bytes "
                "(daemon.max_description_bytes)",
                f"instructions cut at 65,536 of {INSTRUCTIONS:,} bytes "
                "(daemon.max_instructions_bytes)",
            ]
            assert (calm["tools"], calm["prompts"]) == (3, 2)
            for key in ("tools", "prompts", "resources", "resource_templates"):
                assert calm[f"dropped_{key}"] == []
            assert calm["cut"] == []

            text = await cli("status", socket=daemon.socket_path)
            assert "dropped tools| 500 tools past the first 2,000 dropped" in text
            assert "dropped prompts| 100 prompts past the first 2,000 dropped" in text
            assert "cut| instructions cut at 65,536 of 300,000 bytes" in text

            # Nothing past the limits reaches the state file either.
            await daemon.state.flush()
            saved = json.loads((tmp_path / "state" / FILE_NAME).read_bytes())["servers"]
            assert len(saved["flood"]["tools"]) == 2000
            assert len(saved["flood"]["prompts"]) == len(saved["flood"]["templates"]) == 2000
            assert saved["flood"]["tools"][0]["description"].endswith("bytes]")
            assert len(saved["calm"]["tools"]) == 3

    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # One warning per list fetched, not one per item; none for the other server.
    for source in ("tools/list", "prompts/list", "resources/templates/list"):
        assert len([m for m in logged if m.startswith(f"flood: {source}: ")]) == 1, logged
    assert len([m for m in logged if m.startswith("flood: instructions cut")]) == 1
    assert not [m for m in logged if m.startswith("calm:")]


async def test_a_servers_own_limits_apply_to_it_alone(tmp_path: Path) -> None:
    flood = server("--tools", "50") | {"max_list_items": 10, "max_description_bytes": 5}
    cfg = make_config(tmp_path, {"flood": flood, "calm": server("--tools", "50")})
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            tools = by_server(await agent.tools())
            assert (len(tools["flood"]), len(tools["calm"])) == (10, 50)
            assert tools["flood"][0]["description"] == (
                "[flood] test  [mcpd: cut at 5 of 11 bytes]"
            )
            assert tools["calm"][0]["description"] == "[calm] test tool 0"
            rows = {s["alias"]: s for s in (await agent.result("mcpd/status"))["servers"]}
            assert rows["flood"]["dropped_tools"] == [
                "40 tools past the first 10 dropped (servers.flood.max_list_items)"
            ]
            assert len(rows["flood"]["cut"]) == 10
            assert rows["calm"]["dropped_tools"] == rows["calm"]["cut"] == []


async def test_saved_lists_are_held_to_the_limits_when_read_back(tmp_path: Path) -> None:
    """Lists saved under higher limits are cut to today's when a server that is down
    is shown with its last known tools."""
    command, args = scripted("--tools", "30")
    script = 'test -e "$0" && exit 7; exec "$@"'
    web = {"command": "/bin/sh", "args": ["-c", script, str(tmp_path / "down"), command, *args]}
    state = str(tmp_path / "state")
    with trio.fail_after(60):
        async with running(make_config(tmp_path, {"web": web}, state_dir=state)) as daemon:
            await daemon.state.flush()
        (tmp_path / "down").touch()
        lower = make_config(
            tmp_path,
            {"web": web},
            state_dir=state,
            max_list_items=12,
            backoff_base=30,
            backoff_cap=60,
        )
        async with running(lower) as daemon, connect(daemon.socket_path) as agent:
            tools = await agent.tools()
            assert sorted(t["name"] for t in tools) == sorted(
                f"mcp__web__tool{i}" for i in range(12)
            )
            assert not any(t["_meta"]["mcpd/available"] for t in tools)
