"""A 2026-07-28 server's ``requestState`` as large as a modern agent can be handed, and
one larger, through a running daemon, beside small arguments and large: the largest
round-trips over the socket and over HTTP; a larger one ends its call with an error
naming the server, and the agent's other calls go on."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd.agents.askback.state_bound import largest_state, repeated_bytes
from protocol.lines.framing import DEFAULT_MAX_LINE
from tests.support.clients.agent import META, Agent, connect, make_config, running
from tests.support.clients.daemon_http import header_dict, modern_headers
from tests.support.clients.http_stream_client import POST, Client
from tests.support.system.procs import scripted

SHEDDING = str(Path(__file__).parents[3] / "support" / "asking" / "shedding_server.py")
LIMIT = 60
HEAVY = "mcp__s__heavy"
SMALL_LINES = 64 * 1024


def config(tmp_path: Path, **daemon: Any) -> Any:
    command, args = scripted("--slow", "1")
    servers = {
        "s": {"command": sys.executable, "args": [SHEDDING]},
        "w": {"command": command, "args": list(args)},
    }
    return make_config(tmp_path, servers, **daemon)


def arguments(size: int, pad: int) -> dict[str, Any]:
    return {"size": size, "pad": "p" * pad} if pad else {"size": size}


def edge(max_line_bytes: int, pad: int = 0) -> int:
    """The largest state ``heavy`` may ask for with an argument ``pad`` of that many
    characters beside its ``size``, which the retry repeats (written as ``Agent``
    writes them)."""
    size = largest_state(max_line_bytes)
    for _ in range(3):  # the size is in the arguments: settle its digits
        given = Raw(json.dumps(arguments(size, pad)).encode())
        size = largest_state(max_line_bytes, repeated_bytes(HEAVY, given))
    return size


async def heavy_call(agent: Agent, size: int, pad: int = 0) -> dict[str, Any]:
    """The tool ``heavy`` called for a state of ``size`` bytes (with an argument ``pad``
    of that many characters), by an agent that sends back whatever state it is handed,
    as the protocol asks."""
    params: dict[str, Any] = {"name": HEAVY, "arguments": arguments(size, pad)}
    reply = await agent.rpc("tools/call", params)
    result = reply["result"]
    if result.get("resultType") == "input_required":
        reply = await agent.rpc("tools/call", {**params, "requestState": result["requestState"]})
    return reply


@pytest.mark.parametrize(
    ("size", "pad"),
    [
        (60_000, 0),  # under the line the server may write, its token over the agent's
        # Under the bound for a call with small arguments, and over it with these: the
        # retry must bring them again beside the token.
        (24_000, 40_000),
        (edge(SMALL_LINES, 20_000) + 1, 20_000),
    ],
)
async def test_a_state_too_large_to_send_back_ends_its_call_naming_the_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, size: int, pad: int
) -> None:
    largest = edge(SMALL_LINES, pad)
    other: dict[str, Any] = {}
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING):
        async with (
            running(config(tmp_path, max_line_bytes=SMALL_LINES)) as daemon,
            connect(daemon.socket_path) as agent,
        ):

            async def slow_call() -> None:
                other.update(await agent.rpc("tools/call", {"name": "mcp__w__tool0"}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow_call)
                await trio.testing.wait_all_tasks_blocked()  # it waits on its server
                reply = await heavy_call(agent, size, pad)
    result = reply["result"]
    assert result["isError"] is True, result
    text = result["content"][0]["text"]
    assert "'s'" in text
    assert f"{size:,} bytes" in text and f"{largest:,} bytes" in text
    # The agent's connection stayed open: its call to another server was answered.
    assert other["result"]["content"][0]["text"], other
    assert "isError" not in other["result"] or other["result"]["isError"] is False
    # The journal names the server whose answer it was, not the agent.
    [record] = [r for r in caplog.records if r.__dict__.get("mcpd_event") == "state_too_large"]
    assert record.__dict__["mcpd_server"] == "s"


async def test_the_largest_state_round_trips_over_the_socket(tmp_path: Path) -> None:
    size = edge(DEFAULT_MAX_LINE)
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon, connect(daemon.socket_path) as agent:
            reply = await heavy_call(agent, size)
    assert reply["result"]["content"][0]["text"] == f"brought back {size} bytes of state"


async def test_the_largest_state_beside_large_arguments_round_trips(tmp_path: Path) -> None:
    pad = 20_000
    size = edge(SMALL_LINES, pad)
    with trio.fail_after(LIMIT):
        async with (
            running(config(tmp_path, max_line_bytes=SMALL_LINES)) as daemon,
            connect(daemon.socket_path) as agent,
        ):
            reply = await heavy_call(agent, size, pad)
    assert reply["result"]["content"][0]["text"] == f"brought back {size} bytes of state"


async def posted(client: Client, params: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 tools/call over HTTP: the message that answers it."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**params, "_meta": META}}
    headers = header_dict(modern_headers("tools/call", params["name"]))
    status, head, data = await client.request("POST", {**POST, **headers}, body)
    assert status == 200, (status, data[:300])
    if head.get("content-type", "").startswith("text/event-stream"):
        events = re.findall(rb"^data: (.*)$", data, re.M)
        return json.loads(events[-1])  # type: ignore[no-any-return]
    return json.loads(data)  # type: ignore[no-any-return]


async def test_the_largest_state_round_trips_over_http(tmp_path: Path) -> None:
    size = edge(DEFAULT_MAX_LINE)
    params: dict[str, Any] = {"name": HEAVY, "arguments": {"size": size}}
    with trio.fail_after(LIMIT):
        async with (
            running(config(tmp_path)) as daemon,
            Client.open(daemon, unix=daemon.socket_path) as client,
        ):
            asked = await posted(client, params)
            token = asked["result"]["requestState"]
            reply = await posted(client, {**params, "requestState": token})
    assert reply["result"]["content"][0]["text"] == f"brought back {size} bytes of state"
