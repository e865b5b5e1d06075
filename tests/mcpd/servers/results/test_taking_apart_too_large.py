"""A reply over max_line_bytes: the call it answered fails with words saying so, the
server keeps running and stays ready, and the log says the same, whichever end of
the line carries the reply's id."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.system.procs import read_pid, scripted


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


@pytest.mark.parametrize("order", [[], ["--id-last"]], ids=["id-first", "id-last"])
async def test_a_result_over_the_line_limit_fails_only_its_call(
    tmp_path: Path, order: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    pid_file = tmp_path / "pid"
    command, args = scripted("--big", "20000", "--pid-file", str(pid_file), *order)
    cfg = make_config(
        tmp_path, {"big": {"command": command, "args": list(args)}}, max_line_bytes=8192
    )
    with trio.fail_after(30), caplog.at_level(logging.WARNING, "mcpd"):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            pid = await read_pid(pid_file)
            result = await agent.call("mcp__big__tool0", {"text": "all"})
            assert result["isError"] is True
            words = text(result)
            assert "The result from the tool server 'big' was too large to pass on" in words
            assert "a reply of 20" in words and "was larger than the 8192-byte line limit" in words
            assert "'big' is still running" in words and "Ask for less" in words
            assert "unavailable" not in words
            outage = result["_meta"]["mcpd/outage"]
            assert outage["state"] == "too_large"
            # The server was not restarted, is not marked down, and answers the next call.
            status = await agent.result("mcpd/status")
            (row,) = status["servers"]
            assert row["state"] == "ready" and row["restarts"] == 0
            assert row["breaker"]["consecutive_failures"] == 0
            small = await agent.call("mcp__big__tool0", {"text": "small", "big": False})
            assert text(small) == "tool0:small"
            assert await read_pid(pid_file) == pid
            tools = await agent.tools()
            assert all(t["_meta"]["mcpd/available"] for t in tools)
    logged = [r.getMessage() for r in caplog.records if "line limit" in r.getMessage()]
    assert len(logged) == 1
    assert (
        "was larger than the 8192-byte line limit (daemon.max_line_bytes) and was dropped"
        in logged[0]
    )
    assert "it answered failed, the server keeps running" in logged[0]
