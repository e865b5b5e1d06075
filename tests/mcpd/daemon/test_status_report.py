"""What the daemon says of itself, whole and as an agent of one profile reads it."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

import trio

from tests.support.agent import connect, make_config, running
from tests.support.procs import scripted


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


async def test_the_whole_status_and_a_profiles_status(tmp_path: Path) -> None:
    cfg = make_config(
        tmp_path,
        {"alpha": server("--tools", "2"), "beta": server("--tools", "3")},
        profiles={"default": {}, "one": {"servers": ["alpha"]}},
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            whole = await agent.result("mcpd/status")
            await agent.use_profile("one")
            scoped = await agent.result("mcpd/status")
            history = daemon.history()
            metrics = daemon.metrics()
    top = whole["daemon"]
    assert (top["pid"], top["socket"], top["tools"]) == (os.getpid(), daemon.socket_path, 5)
    assert top["state_file"] == daemon.state.path and top["uptime_s"] >= 0
    assert [s["alias"] for s in whole["servers"]] == ["alpha", "beta"]
    assert all(datetime.fromisoformat(s["since"]) for s in whole["servers"])
    assert {p["name"] for p in whole["profiles"]} == {"default", "one"}
    mine = scoped["daemon"]
    assert mine["profile"] == "one" and mine["tools"] == 2
    assert not {"pid", "socket", "config", "state_file", "http"} & set(mine)
    assert [s["alias"] for s in scoped["servers"]] == ["alpha"]
    assert [p["name"] for p in scoped["profiles"]] == ["one"]
    assert (top["summary"], mine["summary"]) == ("2 servers: 2 ready", "1 server: 1 ready")
    assert "beta" not in str(scoped["profiles"])
    assert [h.server for h in history] == ["alpha", "beta"]
    assert 'server="alpha"' in metrics and 'server="beta"' in metrics
