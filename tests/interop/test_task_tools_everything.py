"""server-everything's task-only tool (``simulate-research-query``, which it lists
with ``execution.taskSupport: "required"``) called through mcpd by the official SDK
clients, as a plain tool: mcpd runs it as a task at the server for them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.hosts.peers import console_script, node_env, node_tool
from tests.support.hosts.third_party import run_json, ts_probe
from tests.support.hosts.wiretap import free_port, serve

HERE = Path(__file__).resolve().parent
TOOL = "mcp__everything__simulate-research-query"
ARGS = json.dumps({"topic": "honey bees"})


def config(tmp_path: Path) -> Any:
    server = {"command": node_tool("mcp-server-everything"), "args": ["stdio"], "env": node_env()}
    return make_config(tmp_path, {"everything": server})


def bridge(daemon: Any) -> list[str]:
    return [console_script("mcpd"), "bridge", "--socket", daemon.socket_path]


def reported(seen: dict[str, Any]) -> None:
    assert seen["is_error"] is False
    assert TOOL in seen["tools"]
    assert "# Research Report: honey bees" in "".join(seen["text"])


async def test_typescript_sdk_calls_the_task_only_tool_through_the_bridge(
    tmp_path: Path,
) -> None:
    with trio.fail_after(120):
        async with running(config(tmp_path)) as daemon:
            # The SDK's callTool refuses a tool listed as needing a task: it must not
            # be listed so, and the call must come back with the task's result.
            seen = await run_json([*ts_probe("stdio", TOOL, ARGS, "--", *bridge(daemon))])
    reported(seen)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_python_sdk_calls_the_task_only_tool_through_the_bridge(
    tmp_path: Path, mode: str
) -> None:
    probe = [sys.executable, str(HERE / "sdk_client_probe.py"), mode, TOOL, ARGS, "--"]
    with trio.fail_after(120):
        async with running(config(tmp_path)) as daemon:
            seen = await run_json([*probe, *bridge(daemon)])
    assert seen["protocol_version"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
    reported(seen)


async def test_the_task_only_tool_runs_as_a_task_over_streamable_http(tmp_path: Path) -> None:
    # The task goes in the request's params: a call over HTTP that took the splice
    # used to leave it out, and the server refused a plain call of the tool.
    port = free_port()
    argv = [node_tool("mcp-server-everything"), "streamableHttp"]
    async with serve(argv, port, {**node_env(), "PORT": str(port)}) as server:
        cfg = make_config(tmp_path, {"everything": {"url": server.url()}})
        with trio.fail_after(120):
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                tools = {t["name"]: t for t in await agent.tools()}
                assert "execution" not in tools[TOOL]
                result = await agent.call(TOOL, json.loads(ARGS))
    assert result.get("isError") is not True, result
    text = "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")
    assert "# Research Report: honey bees" in text
