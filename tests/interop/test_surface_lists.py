"""Prompt and resource lists through mcpd, with an official-SDK server: changes heard
from the server and told to exactly the agents that want them, a down server's
entries kept and marked, and prompts curated by the config."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import META, Agent, connect, make_config, running

FOLDER = str(Path(__file__).with_name("servers") / "folder_server.py")


def folder_server(tmp_path: Path, era: str = "auto", **extra: Any) -> dict[str, Any]:
    folder = tmp_path / "docs"
    folder.mkdir(exist_ok=True)
    (folder / "README.md").write_text("readme\n")
    return {"command": sys.executable, "args": [FOLDER, str(folder), "stdio"], "era": era, **extra}


def methods(agent: Agent) -> list[str]:
    return [n["method"] for n in agent.notifications]


async def wait_methods(agent: Agent, *wanted: str) -> None:
    while not set(wanted) <= set(methods(agent)):
        agent.notified = trio.Event()
        await agent.notified.wait()


@pytest.mark.parametrize("server_era", ["legacy", "modern"])
async def test_list_changes_reach_the_agents_that_want_them(
    tmp_path: Path, server_era: str
) -> None:
    cfg = make_config(tmp_path, {"docs": folder_server(tmp_path, server_era)})
    prompts_changed = "notifications/prompts/list_changed"
    resources_changed = "notifications/resources/list_changed"
    with trio.fail_after(60):
        async with (
            running(cfg) as daemon,
            connect(daemon.socket_path, modern=False) as legacy,
            connect(daemon.socket_path) as listening,
            connect(daemon.socket_path) as quiet,
            trio.open_nursery() as nursery,
        ):
            await legacy.initialize()
            wanted = {"promptsListChanged": True, "resourcesListChanged": True}

            async def listen() -> None:
                params = {"notifications": wanted, "_meta": META}
                await listening.rpc("subscriptions/listen", params, rid="L1")

            nursery.start_soon(listen)
            await listening.wait_notifications(1)
            assert listening.notifications[0]["params"]["notifications"] == wanted
            await legacy.call("mcp__docs__add_file", {"name": "new.txt", "text": "new\n"})
            await wait_methods(legacy, prompts_changed, resources_changed)
            await wait_methods(listening, prompts_changed, resources_changed)
            for note in listening.notifications[1:]:
                assert note["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "L1"}
            # The new entries are listed (mcpd fetched them when told).
            names = [p["name"] for p in (await quiet.result("prompts/list"))["prompts"]]
            assert "mcp__docs__review_new" in names
            uris = [r["uri"] for r in (await quiet.result("resources/list"))["resources"]]
            assert "file:///new.txt" in uris
            # Nobody who did not ask heard of it: no tool-list news either.
            assert methods(quiet) == []
            assert "notifications/tools/list_changed" not in methods(listening)
            nursery.cancel_scope.cancel()
        daemon.stop()


async def test_a_down_servers_prompts_and_resources_stay_listed_and_marked(
    tmp_path: Path,
) -> None:
    cfg = make_config(
        tmp_path, {"docs": folder_server(tmp_path)}, backoff_base=30.0, backoff_cap=60.0
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            runner = daemon.supervisor.servers["docs"]
            assert runner.upstream is not None
            pid = runner.upstream.transport.pid  # the server's own process
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            while runner.available:
                await trio.sleep(0.02)
            [prompt] = (await agent.result("prompts/list"))["prompts"]
            assert prompt["name"] == "mcp__docs__review"
            assert prompt["description"].startswith("[unavailable: docs ")
            assert prompt["_meta"]["mcpd/available"] is False
            [resource] = (await agent.result("resources/list"))["resources"]
            assert resource["_meta"]["mcpd/available"] is False
            got = await agent.rpc("prompts/get", {"name": prompt["name"], "arguments": {}})
            assert got["error"]["code"] == -32000
            assert got["error"]["data"]["mcpd/outage"]["server"] == "docs"
            assert "unavailable" in got["error"]["message"]
            read = await agent.rpc("resources/read", {"uri": resource["uri"]})
            assert read["error"]["data"]["mcpd/outage"]["state"] == "failed"
            [row] = daemon.status().servers
            assert (row.prompts, row.resources, row.resource_templates) == (1, 1, 1)
            daemon.stop()


async def test_prompts_are_curated_like_tools(tmp_path: Path) -> None:
    rules = {"rename": {"review": "look"}, "description": {"review": "Look at one file."}}
    cfg = make_config(tmp_path, {"docs": folder_server(tmp_path, prompts=rules)})
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            [prompt] = (await agent.result("prompts/list"))["prompts"]
            assert prompt["name"] == "mcp__docs__look"
            assert prompt["description"] == "[docs] Look at one file."
            assert prompt["_meta"]["mcpd/originalName"] == "review"
            got = await agent.result(
                "prompts/get", {"name": "mcp__docs__look", "arguments": {"name": "README.md"}}
            )
            assert got["messages"][1]["content"]["resource"]["text"] == "readme\n"
            gone = await agent.rpc("prompts/get", {"name": "mcp__docs__review", "arguments": {}})
            assert gone["error"]["code"] == -32602
        daemon.stop()
    hidden = make_config(tmp_path, {"docs": folder_server(tmp_path, prompts={"deny": ["rev*"]})})
    with trio.fail_after(60):
        async with running(hidden) as daemon, connect(daemon.socket_path) as agent:
            assert (await agent.result("prompts/list"))["prompts"] == []
            daemon.stop()


async def test_a_lazy_server_is_started_for_a_read_and_a_prompt(tmp_path: Path) -> None:
    server = folder_server(tmp_path, start="lazy", idle_stop=0.2)
    cfg = make_config(tmp_path, {"docs": server})
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            runner = daemon.supervisor.servers["docs"]
            while runner.state != "idle":  # listed once at startup, then stopped
                await runner.phase_changed()
            [resource] = (await agent.result("resources/list"))["resources"]
            read = await agent.result("resources/read", {"uri": resource["uri"]})
            assert read["contents"][0]["text"] == "readme\n"
            while runner.state != "idle":  # stopped again once nothing uses it
                await runner.phase_changed()
            got = await agent.result(
                "prompts/get", {"name": "mcp__docs__review", "arguments": {"name": "README.md"}}
            )
            assert got["messages"][1]["content"]["resource"]["text"] == "readme\n"
            daemon.stop()


async def test_prompts_and_resources_are_remembered_across_restarts(tmp_path: Path) -> None:
    """A lazy server known from the state file is not started at startup: its prompts
    and resources are listed from what the last run saw, and a read starts it."""
    cfg = make_config(tmp_path, {"docs": folder_server(tmp_path, start="lazy")})
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            runner = daemon.supervisor.servers["docs"]
            while runner.state != "idle":
                await runner.phase_changed()
            daemon.stop()
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            runner = daemon.supervisor.servers["docs"]
            assert runner.state == "idle" and runner.upstream is None
            [prompt] = (await agent.result("prompts/list"))["prompts"]
            assert prompt["name"] == "mcp__docs__review"
            [resource] = (await agent.result("resources/list"))["resources"]
            assert resource["uri"] == "file:///README.md"
            read = await agent.result("resources/read", {"uri": resource["uri"]})
            assert read["contents"][0]["text"] == "readme\n"
            daemon.stop()
