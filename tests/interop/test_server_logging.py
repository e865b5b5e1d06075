"""Server logging through mcpd: server-everything's simulated log messages reach the
official SDK clients that asked for them (at their level or worse, named after the
server) over `mcpd bridge`, and no one else."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import make_config, running
from tests.support.hosts.peers import console_script, node_env, node_tool
from tests.support.hosts.third_party import PEERS, node, run_json, ts_probe

HERE = Path(__file__).resolve().parent
TOGGLE = "mcp__everything__toggle-simulated-logging"
SEVERE = {"error", "critical", "alert", "emergency"}


def config(tmp_path: Path) -> Any:
    server = {"command": node_tool("mcp-server-everything"), "args": ["stdio"], "env": node_env()}
    return make_config(tmp_path, {"everything": server})


def bridge(daemon: Any) -> list[str]:
    return [console_script("mcpd"), "bridge", "--socket", daemon.socket_path]


async def test_typescript_sdk_clients_get_the_log_level_they_asked_for(tmp_path: Path) -> None:
    with trio.fail_after(150):
        async with running(config(tmp_path)) as daemon:
            ts_probe()  # skips when the TypeScript SDK is not installed
            script = [node(), str(HERE / "ts_sdk_logging.mjs"), str(PEERS), TOGGLE]
            seen = await run_json([*script, "--", *bridge(daemon)])
    assert seen["logging_capability"] == {}
    assert seen["answered"] == {}
    assert seen["refused"]["code"] == -32602
    assert (
        "debug, info, notice, warning, error, critical, alert, emergency"
        in (seen["refused"]["message"])
    )
    verbose = seen["verbose"]
    assert {m["logger"] for m in verbose} == {"everything"}
    assert all("message" in m["data"] for m in verbose)  # the server's text, as it was
    assert {m["level"] for m in verbose} - SEVERE, "the debug agent got the lesser levels"
    # The agent at "error" got exactly the severe ones of what the other was sent.
    assert seen["severe"] == [m for m in verbose if m["level"] in SEVERE]
    assert seen["silent"] == []


async def test_python_sdk_client_gets_log_messages_named_after_the_server(
    tmp_path: Path,
) -> None:
    with trio.fail_after(150):
        async with running(config(tmp_path)) as daemon:
            client = [sys.executable, str(HERE / "sdk_client_logging.py"), TOGGLE]
            seen = await run_json([*client, "--", *bridge(daemon)])
    heard = seen["heard"]
    assert heard and {m["logger"] for m in heard} == {"everything"}
    assert all(m["level"] in {"warning", *SEVERE} for m in heard)
    assert all(isinstance(m["data"], str) and "message" in m["data"] for m in heard)
