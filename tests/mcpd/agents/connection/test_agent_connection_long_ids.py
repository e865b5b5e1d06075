"""A request whose id is a string too long to keep, or an integer past 64 bits, through
a running daemon: it is refused as an invalid request under a null id, with an error
that names the id's length and the bound; the connection serves its next requests, the
log names the agent, and over HTTP the same request gets the same error."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.jsonrpc import messages as rpc
from tests.support.clients.agent import META, Agent, connect, make_config, running
from tests.support.clients.daemon_http import CURL, modern_headers, post
from tests.support.system.procs import scripted

LONG = 100_000  # characters of the id refused
HUGE = 10**4000  # an integer id refused: msgspec reads up to 4,300 digits


def request(rid: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": META}}


def assert_refused(reply: dict[str, Any]) -> None:
    assert reply["id"] is None
    assert reply["error"]["code"] == rpc.INVALID_REQUEST
    message = reply["error"]["message"]
    assert f"{LONG} characters" in message and f"{rpc.MAX_ID_LENGTH} an id may have" in message


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


def config(tmp_path: Path) -> Any:
    command, args = scripted()
    return make_config(
        tmp_path,
        {"s": {"command": command, "args": list(args)}},
        state_dir=str(tmp_path / "state"),
        audit_journal=False,
    )


async def send(agent: Agent, message: dict[str, Any]) -> None:
    await agent.send_raw(json.dumps(message).encode() + b"\n")


@pytest.mark.parametrize("method", ["tools/call", "ping"])
async def test_a_request_whose_id_is_too_long_is_refused_and_the_connection_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, method: str
) -> None:
    """A tools/call (the spliced path) and any other request (the general one)."""
    caplog.set_level(logging.WARNING, logger="mcpd.agents")
    params = {"name": "mcp__s__tool0", "arguments": {"text": "x"}} if method == "tools/call" else {}
    with trio.fail_after(30):
        async with running(config(tmp_path)) as daemon, connect(daemon.socket_path) as agent:
            await send(agent, request("i" * LONG, method, params))
            [reply] = await agent.wait_unmatched(1)
            assert_refused(reply)
            # The longest id taken is taken.
            longest = "j" * rpc.MAX_ID_LENGTH
            answer = await agent.rpc(method, params, rid=longest)
            assert answer["id"] == longest and "result" in answer
            assert text(await agent.call("mcp__s__tool0", {"text": "after"})) == "tool0:after"
            assert not agent.closed.is_set() and len(agent.unmatched) == 1
    logged = [r.getMessage() for r in caplog.records if r.name == "mcpd.agents"]
    named = f"(pid {os.getpid()}, uid {os.getuid()})"
    assert any(named in m and f"{LONG} characters" in m for m in logged), logged


@pytest.mark.skipif(CURL is None, reason="needs curl")
async def test_over_http_a_request_whose_id_is_too_long_gets_the_same_error(
    tmp_path: Path,
) -> None:
    with trio.fail_after(30):
        async with running(config(tmp_path)) as daemon:
            params = {"name": "mcp__s__tool0", "arguments": {"text": "x"}}
            body = request("i" * LONG, "tools/call", params)
            reply = await post(
                daemon.socket_path, body, *modern_headers("tools/call", "mcp__s__tool0")
            )
            assert reply.status == 400
            assert_refused(reply.json())


def assert_huge_refused(reply: dict[str, Any]) -> None:
    assert reply["id"] is None
    assert reply["error"]["code"] == rpc.INVALID_REQUEST
    message = reply["error"]["message"]
    assert "an integer of 4001 digits" in message and f"to {rpc.MAX_INT_ID} an id may be" in message


@pytest.mark.parametrize("method", ["tools/call", "ping"])
async def test_a_request_whose_id_is_an_integer_past_64_bits_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, method: str
) -> None:
    """Each end of what an id may be is taken: the least signed 64-bit integer, and
    the largest unsigned one, which the spliced path leaves to the general one."""
    caplog.set_level(logging.WARNING, logger="mcpd.agents")
    params = {"name": "mcp__s__tool0", "arguments": {"text": "x"}} if method == "tools/call" else {}
    with trio.fail_after(30):
        async with running(config(tmp_path)) as daemon, connect(daemon.socket_path) as agent:
            for huge in (HUGE, rpc.MAX_INT_ID + 1, rpc.MIN_INT_ID - 1):
                await send(agent, request(huge, method, params))
            replies = await agent.wait_unmatched(3)
            assert_huge_refused(replies[0])
            assert all(r["id"] is None for r in replies)
            assert "an integer of 20 digits" in replies[1]["error"]["message"]
            assert "an integer of 19 digits" in replies[2]["error"]["message"]
            for taken in (rpc.MAX_INT_ID, rpc.MIN_INT_ID):
                answer = await agent.rpc(method, params, rid=taken)
                assert answer["id"] == taken and "result" in answer
            assert not agent.closed.is_set() and len(agent.unmatched) == 3
    logged = [r.getMessage() for r in caplog.records if r.name == "mcpd.agents"]
    named = f"(pid {os.getpid()}, uid {os.getuid()})"
    assert any(named in m and "4001 digits" in m for m in logged), logged


@pytest.mark.skipif(CURL is None, reason="needs curl")
async def test_over_http_a_request_whose_id_is_an_integer_past_64_bits_gets_the_same_error(
    tmp_path: Path,
) -> None:
    with trio.fail_after(30):
        async with running(config(tmp_path)) as daemon:
            params = {"name": "mcp__s__tool0", "arguments": {"text": "x"}}
            body = request(HUGE, "tools/call", params)
            reply = await post(
                daemon.socket_path, body, *modern_headers("tools/call", "mcp__s__tool0")
            )
            assert reply.status == 400
            assert_huge_refused(reply.json())
