"""A 2026-07-28 server's ``input_required`` to a prompts/get or resources/read, whose
``requestState`` a modern agent is handed as the server wrote it, through a running
daemon: one as large as the agent's retry can bring back round-trips; a larger one ends
the request with an error reply naming the server and both sizes, the journal names the
server, and the agent's connection and its other calls go on."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from msgspec import UNSET, Raw, UnsetType

from mcpd.agents.askback.state_bound import largest_state, repeated_bytes
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.system.procs import scripted

SHEDDING = str(Path(__file__).parents[3] / "support" / "asking" / "shedding_server.py")
LIMIT = 60
SMALL_LINES = 64 * 1024


def config(tmp_path: Path) -> Any:
    command, args = scripted("--slow", "1")
    servers = {
        "s": {"command": sys.executable, "args": [SHEDDING]},
        "w": {"command": command, "args": list(args)},
    }
    return make_config(tmp_path, servers, max_line_bytes=SMALL_LINES)


def request(method: str, size: int) -> tuple[dict[str, Any], str, Raw | UnsetType]:
    """The params that ask ``heavy`` for a state of ``size`` bytes, the name the retry
    repeats and the arguments it repeats (as ``Agent`` writes them)."""
    if method == "prompts/get":
        arguments = {"size": str(size)}
        given = Raw(json.dumps(arguments).encode())
        return {"name": "mcp__s__heavy", "arguments": arguments}, "mcp__s__heavy", given
    uri = f"heavy://{size}"
    return {"uri": uri}, uri, UNSET


def edge(method: str) -> int:
    """The largest state ``heavy`` may hand an agent by ``method`` at ``SMALL_LINES``."""
    size = largest_state(SMALL_LINES)
    for _ in range(3):  # the size is in the request: settle its digits
        _, name, given = request(method, size)
        size = largest_state(SMALL_LINES, repeated_bytes(name, given))
    return size


async def asked_and_retried(agent: Agent, method: str, size: int) -> dict[str, Any]:
    """``method`` of ``heavy`` for a state of ``size`` bytes, by an agent that sends back
    whatever state it is handed, as the protocol asks."""
    params = request(method, size)[0]
    reply = await agent.rpc(method, params)
    result = reply.get("result", {})
    if result.get("resultType") == "input_required":
        reply = await agent.rpc(method, {**params, "requestState": result["requestState"]})
    return reply


@pytest.mark.parametrize("method", ["prompts/get", "resources/read"])
# The least too large, and one whose retry would be over the agent's line.
@pytest.mark.parametrize("over", [1, 65_300 - edge("prompts/get")])
async def test_a_state_too_large_to_send_back_ends_the_request_naming_the_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, method: str, over: int
) -> None:
    size = edge(method) + over
    other: dict[str, Any] = {}
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING):
        async with running(config(tmp_path)) as daemon, connect(daemon.socket_path) as agent:

            async def slow_call() -> None:
                other.update(await agent.rpc("tools/call", {"name": "mcp__w__tool0"}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow_call)
                await trio.testing.wait_all_tasks_blocked()  # it waits on its server
                reply = await asked_and_retried(agent, method, size)
    error = reply["error"]
    assert "'s'" in error["message"], error
    assert f"{size:,} bytes" in error["message"]
    assert f"{edge(method):,} bytes" in error["message"]
    assert error["data"] == {"server": "s", "largestState": edge(method)}
    # The agent's connection stayed open: its call to another server was answered.
    assert other["result"]["content"][0]["text"], other
    [record] = [r for r in caplog.records if r.__dict__.get("mcpd_event") == "state_too_large"]
    assert record.__dict__["mcpd_server"] == "s"


@pytest.mark.parametrize("method", ["prompts/get", "resources/read"])
async def test_the_largest_state_round_trips(tmp_path: Path, method: str) -> None:
    size = edge(method)
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon, connect(daemon.socket_path) as agent:
            reply = await asked_and_retried(agent, method, size)
    said = f"brought back {size} bytes of state"
    if method == "prompts/get":
        assert reply["result"]["messages"][0]["content"]["text"] == said, reply
    else:
        assert reply["result"]["contents"][0]["text"] == said, reply
