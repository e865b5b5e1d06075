"""Long replies through a daemon: a tools/list of thousands of tools is made as the
agent reads it, never whole in memory, and is still one line of JSON; over HTTP it is
the response's body, whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import META, connect, make_config, running
from tests.support.clients.daemon_http import CURL, stateless
from tests.support.system.procs import scripted


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


def request(rid: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**(params or {})}}
    body["params"]["_meta"] = META
    return json.dumps(body).encode() + b"\n"


async def read_lines(stream: trio.SocketStream, count: int) -> list[bytes]:
    buf = b""
    while buf.count(b"\n") < count:
        data = await stream.receive_some(1 << 16)
        assert data, f"the connection ended before {count} lines came"
        buf += data
    lines = buf.split(b"\n")
    assert lines[count:] == [b""]
    return lines[:count]


TOOLS = 3000  # about 1.5 MB of listing: more than a socket holds unread


async def test_lines_sent_while_a_long_listing_is_written_follow_it_whole(
    tmp_path: Path,
) -> None:
    cfg = make_config(
        tmp_path, {"big": server("--tools", str(TOOLS), "--slow", "0.2")}, max_list_items=TOOLS
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            stream = await trio.open_unix_socket(daemon.socket_path)
            async with stream:
                call = {"name": "mcp__big__tool7", "arguments": {"text": "hi"}}
                await stream.send_all(request(1, "tools/list") + request(2, "tools/call", call))
                # Not reading: the listing stops half-way, and the call's answer (0.2 s
                # later) comes while it waits for the agent.
                await trio.sleep(1)
                first, second = await read_lines(stream, 2)
    listing, answer = json.loads(first), json.loads(second)
    assert listing["id"] == 1
    names = [t["name"] for t in listing["result"]["tools"]]
    assert names == sorted(f"mcp__big__tool{i}" for i in range(TOOLS))
    assert listing["result"]["resultType"] == "complete"
    assert listing["result"]["_meta"]["mcpd/servers"][0]["state"] == "ready"
    assert answer["id"] == 2
    assert answer["result"]["content"][0]["text"] == "tool7:hi"


async def test_a_long_listing_begun_is_finished_even_if_cancelled(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"big": server("--tools", str(TOOLS))}, max_list_items=TOOLS)
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            stream = await trio.open_unix_socket(daemon.socket_path)
            async with stream:
                await stream.send_all(request(1, "tools/list"))
                first = await stream.receive_some(1 << 16)  # it has begun
                cancel = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": 1},
                }
                await stream.send_all(json.dumps(cancel).encode() + b"\n" + request(2, "ping"))
                rest = await read_lines(stream, 2)
            rest[0] = first + rest[0]
            listing, pong = (json.loads(line) for line in rest)
            assert len(listing["result"]["tools"]) == TOOLS
            assert pong == {"jsonrpc": "2.0", "id": 2, "result": {"resultType": "complete"}}


async def test_an_agent_that_leaves_mid_listing_costs_nobody_else(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"big": server("--tools", str(TOOLS))}, max_list_items=TOOLS)
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            stream = await trio.open_unix_socket(daemon.socket_path)
            await stream.send_all(request(1, "tools/list"))
            assert await stream.receive_some(1 << 16)
            await stream.aclose()
            async with connect(daemon.socket_path) as agent:
                assert len(await agent.tools()) == TOOLS
                result = await agent.call("mcp__big__tool0", {"text": "still"})
                assert result["content"][0]["text"] == "tool0:still"


async def test_two_long_listings_asked_at_once_are_written_one_after_the_other(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"big": server("--tools", str(TOOLS))}, max_list_items=TOOLS)
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            stream = await trio.open_unix_socket(daemon.socket_path)
            async with stream:
                await stream.send_all(request(1, "tools/list") + request(2, "tools/list"))
                await trio.sleep(0.5)  # both under way before anything is read
                lines = await read_lines(stream, 2)
    replies = [json.loads(line) for line in lines]
    assert sorted(r["id"] for r in replies) == [1, 2]
    assert all(len(r["result"]["tools"]) == TOOLS for r in replies)


@pytest.mark.skipif(CURL is None, reason="needs curl")
async def test_a_long_listing_over_http_is_the_responses_body_whole(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"big": server("--tools", "300")})
    with trio.fail_after(30):
        async with running(cfg) as daemon:
            listing = await stateless(daemon.socket_path, "tools/list", {}, META)
    names = [t["name"] for t in listing["result"]["tools"]]
    assert names == sorted(f"mcp__big__tool{i}" for i in range(300))
    assert listing["result"]["resultType"] == "complete"
