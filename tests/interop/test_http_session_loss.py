"""The official Python SDK's Streamable HTTP server restarted under a running daemon:
the legacy session mcpd held is gone (404), and the server refuses any request that
comes without one (400 "Missing session ID"). Calls made at once just after the
restart all get their answers, each run once by the new process."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.daemons.supervision import text, wait_state
from tests.support.hosts.peers import SERVERS, v1_python
from tests.support.hosts.wiretap import free_port, serve

# A pytestmark in conftest.py marks nothing, so each module marks itself.
pytestmark = pytest.mark.interop

CALLS = 10


def server_argv(sdk: str, port: int) -> list[str]:
    if sdk == "v1":
        return [v1_python(), str(SERVERS / "sdk1_server.py"), "http", str(port), "--tally"]
    return [sys.executable, str(SERVERS / "sdk_server.py"), "http", str(port), "--tally"]


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_calls_made_at_once_after_the_server_restarted_all_run_once(
    tmp_path: Path, sdk: str
) -> None:
    port = free_port()
    argv = server_argv(sdk, port)
    url = f"http://127.0.0.1:{port}/mcp"
    cfg = make_config(tmp_path, {"sdk": {"url": url, "era": "legacy"}}, health_interval=0)
    answers: dict[int, str] = {}
    with trio.fail_after(90):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            async with serve(argv, port):
                await wait_state(agent, "sdk", "ready")
                assert text(await tally(agent, "before")) == "before 1"
            async with serve(argv, port) as again:

                async def one(n: int) -> None:
                    answers[n] = text(await tally(agent, f"k{n}"))

                async with trio.open_nursery() as nursery:
                    for n in range(CALLS):
                        nursery.start_soon(one, n)
                # Each ran once: the next run of each key is its second.
                for n in range(CALLS):
                    assert text(await tally(agent, f"k{n}")) == f"k{n} 2"
                assert again.count("Created new transport with session ID") == 1, again.text
    assert answers == {n: f"k{n} 1" for n in range(CALLS)}


async def tally(agent: Agent, key: str) -> dict[str, Any]:
    answer = await agent.call("mcp__sdk__tally", {"key": key})
    assert not answer.get("isError"), answer
    return answer
