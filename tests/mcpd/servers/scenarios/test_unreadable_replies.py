"""What a stdio server sends that no client should take, through a running daemon, in
either era: a number no common decoder reads (an integer of 100,000 digits, 1e999999)
anywhere in a result, a reply sent as a JSON-RPC batch or giving its "id" twice, each
fails its call at once as the server's malformed reply naming what is wrong, not at
its time limit, and the server answers the next call; a result with no content is the
server's malformed result. An agent's call holding such a number is answered with a
parse error under its id, and never reaches the server."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import META, Agent, connect, make_config, running

SERVER = str(Path(__file__).parents[3] / "support" / "servers" / "misreplying.py")
# Far longer than the test waits for a refused reply: it must not be what ends a call.
CALL_TIMEOUT = 60.0


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


def config(tmp_path: Path, legacy: bool) -> Any:
    args = [SERVER, "--legacy"] if legacy else [SERVER]
    server = {"command": sys.executable, "args": args, "call_timeout": CALL_TIMEOUT}
    return make_config(tmp_path, {"odd": server}, startup_deadline=10.0)


@contextlib.asynccontextmanager
async def agent_of(path: str, legacy: bool) -> AsyncIterator[Agent]:
    """An agent of the era ``legacy`` says, its session begun."""
    async with connect(path, modern=not legacy) as agent:
        if legacy:
            await agent.initialize()
        yield agent


async def refused(agent: Agent, tool: str, *words: str) -> None:
    """The call comes back at once as an error naming the server and ``words``."""
    with trio.fail_after(10):
        result = await agent.call(f"mcp__odd__{tool}", {})
    said = text(result)
    assert result.get("isError") is True, result
    assert "The tool server 'odd'" in said, said
    for word in words:
        assert word in said, said


async def echoed(agent: Agent, arguments: dict[str, Any]) -> str:
    result = await agent.call("mcp__odd__echo", arguments)
    assert not result.get("isError"), result
    return text(result)


@pytest.mark.parametrize("legacy", [False, True], ids=["modern", "legacy"])
async def test_a_reply_holding_a_number_no_decoder_reads_fails_its_call_at_once(
    tmp_path: Path, legacy: bool
) -> None:
    with trio.fail_after(60):
        async with (
            running(config(tmp_path, legacy)) as daemon,
            agent_of(daemon.socket_path, legacy) as agent,
        ):
            for tool, what in (
                ("big_integer", "an integer written in 100000 characters"),
                ("big_double", "one past the largest double"),
            ):
                await refused(
                    agent,
                    tool,
                    "sent a malformed reply to this call",
                    f"a number no JSON decoder reads ({what}",
                    "'odd' is still running",
                )
            assert await echoed(agent, {"a": 1}) == '3:{"a": 1}'


@pytest.mark.parametrize("legacy", [False, True], ids=["modern", "legacy"])
async def test_a_reply_in_a_batch_or_giving_its_id_twice_fails_its_call_at_once(
    tmp_path: Path, legacy: bool
) -> None:
    with trio.fail_after(60):
        async with (
            running(config(tmp_path, legacy)) as daemon,
            agent_of(daemon.socket_path, legacy) as agent,
        ):
            await refused(
                agent,
                "batch",
                "sent a malformed reply to this call",
                "sent in a JSON-RPC batch",
            )
            await refused(
                agent,
                "twice_named",
                "sent a malformed reply to this call",
                'sent with more than one "id" (',
                '"zzz"',
            )
            assert await echoed(agent, {}) == "3:{}"


@pytest.mark.parametrize("legacy", [False, True], ids=["modern", "legacy"])
async def test_a_result_with_no_content_is_the_servers_malformed_result(
    tmp_path: Path, legacy: bool
) -> None:
    with trio.fail_after(60):
        async with (
            running(config(tmp_path, legacy)) as daemon,
            agent_of(daemon.socket_path, legacy) as agent,
        ):
            for tool in ("no_content", "null_content"):
                await refused(agent, tool, "returned a malformed result: no content")


@pytest.mark.parametrize("splice", [True, False], ids=["spliced", "general"])
@pytest.mark.parametrize("legacy", [False, True], ids=["modern", "legacy"])
@pytest.mark.parametrize(
    ("number", "what"),
    [
        (b"9" * 100_000, "an integer written in 100000 characters"),
        (b"-1.5e999999", "one past the largest double"),
    ],
    ids=["integer", "double"],
)
async def test_an_agents_call_holding_such_a_number_is_a_parse_error_the_server_never_gets(
    tmp_path: Path, legacy: bool, splice: bool, number: bytes, what: str
) -> None:
    with trio.fail_after(60):
        async with (
            running(config(tmp_path, legacy), splice=splice) as daemon,
            agent_of(daemon.socket_path, legacy) as agent,
        ):
            params: dict[str, Any] = {"name": "mcp__odd__echo", "arguments": {"n": "<n>"}}
            if not legacy:
                params["_meta"] = META
            line = json.dumps({"jsonrpc": "2.0", "id": "big", "method": "tools/call"})
            line = line[:-1] + f', "params": {json.dumps(params)}}}'
            await agent.send_raw(line.encode().replace(b'"<n>"', number) + b"\n")
            with trio.fail_after(10):
                (reply,) = await agent.wait_unmatched(1)
            assert reply["id"] == "big", reply
            assert reply["error"]["code"] == -32700, reply
            message = reply["error"]["message"]
            assert f"a number no JSON decoder reads ({what}" in message, message
            assert await echoed(agent, {"a": 1}) == '1:{"a": 1}'
