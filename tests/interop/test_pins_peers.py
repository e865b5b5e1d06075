"""The real servers of ``tests/peers``, through a running daemon, restarted once: none
of their items is flagged or held, and listing them again changes no pin."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.hosts.peers import SERVERS, console_script, node_env, node_tool, sdk_server_cmd


def peers(folder: Path) -> dict[str, Any]:
    command, args = sdk_server_cmd()
    env = node_env()
    return {
        "everything": {
            "command": node_tool("mcp-server-everything"),
            "args": ["stdio"],
            "env": env,
        },
        "filesystem": {
            "command": node_tool("mcp-server-filesystem"),
            "args": [str(folder)],
            "env": env,
        },
        "memory": {"command": node_tool("mcp-server-memory"), "env": env},
        "time": {"command": console_script("mcp-server-time")},
        "sdk": {"command": command, "args": args},
        "folder": {
            "command": sys.executable,
            "args": [str(SERVERS / "folder_server.py"), str(folder), "stdio"],
        },
    }


async def cli(socket: str, *args: str) -> tuple[int, str]:
    done = await trio.run_process(
        [sys.executable, "-m", "mcpd", *args, "--socket", socket],
        capture_stdout=True,
        check=False,
    )
    return done.returncode, done.stdout.decode()


async def test_real_servers_are_neither_flagged_nor_held(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text("a file\n")
    cfg = make_config(tmp_path, peers(folder), state_dir=str(tmp_path / "state"))
    with trio.fail_after(180):
        for _ in range(2):  # the second time against the pins of the first
            async with running(cfg) as daemon:
                code, out = await cli(daemon.socket_path, "tools", "--findings")
                assert (code, out) == (0, "no findings\n")
                code, out = await cli(daemon.socket_path, "tools", "--pending")
                assert (code, out) == (0, "nothing waits for approval\n")
                async with connect(daemon.socket_path) as agent:
                    tools = await agent.tools()
                    assert len({t["_meta"]["mcpd/server"] for t in tools}) == 6
                    assert all(t["_meta"]["mcpd/available"] for t in tools)
                code, out = await cli(daemon.socket_path, "status", "--json")
                status = json.loads(out)["daemon"]
                assert (status["held"], status["findings"], status["definition_changes"]) == (
                    0,
                    0,
                    0,
                )
