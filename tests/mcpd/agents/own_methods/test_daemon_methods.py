"""The daemon's own methods on its socket, asked by an agent of a running daemon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.system.procs import scripted


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


async def test_status_method_reports_every_server(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server(), "ghost": {"command": "/nonexistent/x"}})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            status = await agent.result("mcpd/status")
            by = {s["alias"]: s for s in status["servers"]}
            assert by["alpha"]["state"] == "ready" and by["alpha"]["era"] == "modern"
            assert by["alpha"]["tools"] == 3 and by["alpha"]["transport"] == "stdio"
            assert by["ghost"]["state"] in ("failed", "starting", "crash_loop")
            assert "command not found" in by["ghost"]["last_error"]
            for s in status["servers"]:
                assert {
                    "alias",
                    "transport",
                    "state",
                    "era",
                    "tools",
                    "last_error",
                    "since",
                } <= s.keys()


async def test_the_line_limit_and_a_reload_by_the_daemons_user_are_answered(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"alpha": server()}, max_line_bytes=65536)
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            limit = await agent.result("mcpd/lineLimit")
            assert limit == {"resultType": "complete", "maxLineBytes": 65536}
            # The daemon's own user is let through to the reload, which has no file.
            reply = await agent.rpc("mcpd/reload")
            assert reply["error"]["message"] == "mcpd was started without a config file to re-read"
