"""A 2026-07-28 server's ``input_required`` rounds as agents of either era meet them,
through a running daemon: one that asks nothing and only hands back a
``requestState`` (a server shedding load), one that never stops asking, and an agent
that never answers what it is asked."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import pytest
import trio

from mcpd.agents.askback import rounds
from mcpd.agents.askback.askers import MAX_ROUNDS
from mcpd.agents.calls import results
from mcpd.daemon import Daemon
from tests.support.clients.agent import connect, make_config, running
from tests.support.clients.answering import connect_answering

SHEDDING = str(Path(__file__).parents[3] / "support" / "asking" / "shedding_server.py")
LIMIT = 60
SERVED = "served after 3 retries, without inputResponses"
# (method, params of the request, where the server's words are in its result)
REQUESTS = [
    ("tools/call", {"name": "mcp__s__busy", "arguments": {}}),
    ("prompts/get", {"name": "mcp__s__busy"}),
    ("resources/read", {"uri": "shed://now"}),
]


def said(method: str, result: dict[str, Any]) -> str:
    """The text of a completed request's result."""
    if method == "tools/call":
        text = result["content"][0]["text"]
    elif method == "prompts/get":
        text = result["messages"][0]["content"]["text"]
    else:
        text = result["contents"][0]["text"]
    assert isinstance(text, str)
    return text


@asynccontextmanager
async def shedding(tmp_path: Path, busy: int = 3, **daemon: Any) -> AsyncIterator[Daemon]:
    server = {"command": sys.executable, "args": [SHEDDING, "--busy", str(busy)]}
    config = make_config(tmp_path, {"s": server}, **daemon)
    async with running(config) as running_daemon:
        yield running_daemon


@pytest.mark.parametrize(("method", "params"), REQUESTS)
@pytest.mark.parametrize("capabilities", [{}, {"elicitation": {}}])
async def test_a_legacy_agent_gets_what_a_server_shedding_load_serves_in_the_end(
    tmp_path: Path, method: str, params: dict[str, Any], capabilities: dict[str, Any]
) -> None:
    # Nothing is asked of the agent, so it needs no capability: mcpd sends the state
    # back at once, as often as the server hands one back.
    with trio.fail_after(LIMIT):
        async with (
            shedding(tmp_path) as daemon,
            connect_answering(daemon.socket_path, False) as agent,
        ):
            await agent.initialize_with(capabilities)
            reply = await agent.rpc(method, params)
    assert "result" in reply, reply
    assert said(method, reply["result"]) == SERVED
    assert agent.asked == []


class _Decoder(Protocol):
    def decode(self, raw: bytes) -> Any: ...


class _Counted:
    """A head decoder of the agent side's, keeping every result it reads."""

    def __init__(self, decoder: _Decoder, read: list[bytes]) -> None:
        self.decoder, self.read = decoder, read

    def decode(self, raw: bytes) -> Any:
        self.read.append(bytes(raw))
        return self.decoder.decode(raw)


@pytest.mark.parametrize(("busy", "heads"), [(0, 0), (3, 3)])
@pytest.mark.parametrize("capabilities", [{}, {"elicitation": {}}])
async def test_a_legacy_agents_call_reads_each_result_head_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    busy: int,
    heads: int,
    capabilities: dict[str, Any],
) -> None:
    # The head of a result its server's scheduler read goes with the call: the agent
    # side reads only what was changed after (each input_required, cleaned), once.
    read: list[bytes] = []
    monkeypatch.setattr(rounds, "_heads", _Counted(rounds._heads, read))
    monkeypatch.setattr(results, "_KINDS", _Counted(results._KINDS, read))
    monkeypatch.setattr(results, "_HEADS", _Counted(results._HEADS, read))
    with trio.fail_after(LIMIT):
        async with (
            shedding(tmp_path, busy) as daemon,
            connect_answering(daemon.socket_path, False) as agent,
        ):
            await agent.initialize_with(capabilities)
            reply = await agent.rpc("tools/call", {"name": "mcp__s__busy", "arguments": {}})
    assert said("tools/call", reply["result"]) == SERVED.replace("3", str(busy))
    assert len(read) == heads, read
    assert all(b'"input_required"' in head for head in read)
    assert len(set(read)) == len(read)


@pytest.mark.parametrize(("method", "params"), REQUESTS)
async def test_a_modern_agent_that_declared_nothing_is_handed_the_state_to_retry_with(
    tmp_path: Path, method: str, params: dict[str, Any]
) -> None:
    with trio.fail_after(LIMIT):
        async with shedding(tmp_path) as daemon, connect(daemon.socket_path) as agent:
            states = []
            reply = await agent.rpc(method, params)
            while reply.get("result", {}).get("resultType") == "input_required":
                result = reply["result"]
                assert "inputRequests" not in result
                states.append(result["requestState"])
                reply = await agent.rpc(method, {**params, "requestState": states[-1]})
    assert "result" in reply, reply
    assert reply["result"]["resultType"] == "complete"
    assert said(method, reply["result"]) == SERVED
    if method == "tools/call":
        # A call's state is handed over in one of mcpd's own, which its retry trades
        # back for the server's as the same call's next round.
        assert len(states) == 3 and all(s.startswith("mcpd-round:") for s in states)
    else:
        assert states == ["shed-1", "shed-2", "shed-3"]


async def test_a_server_that_keeps_asking_is_named_for_it_at_mcpds_round_limit(
    tmp_path: Path,
) -> None:
    def answer(method: str, params: Any) -> Any:
        return {"action": "accept", "content": {"x": "y"}}

    with trio.fail_after(LIMIT):
        async with (
            shedding(tmp_path) as daemon,
            connect_answering(daemon.socket_path, False, answer) as agent,
        ):
            await agent.initialize_with({"elicitation": {}})
            reply = await agent.rpc("tools/call", {"name": "mcp__s__endless", "arguments": {}})
    assert len(agent.asked) == MAX_ROUNDS
    assert "error" in reply, reply
    message = reply["error"]["message"]
    assert f"mcpd's limit of {MAX_ROUNDS} rounds" in message
    assert "kept asking" in message
    assert "capabilit" not in message


async def test_an_agent_that_does_not_answer_ends_the_call_at_ask_timeout(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with (
            shedding(tmp_path, ask_timeout=0.5) as daemon,
            connect_answering(daemon.socket_path, False, None) as agent,
        ):
            agent.hold = True  # its user never answers
            await agent.initialize_with({"elicitation": {}})
            reply = await agent.rpc("tools/call", {"name": "mcp__s__endless", "arguments": {}})
    (asked,) = agent.asked
    assert "error" in reply, reply
    assert "did not answer elicitation/create within 0.5 s" in reply["error"]["message"]
    # The agent is told to stop asking its user.
    (cancelled,) = [n for n in agent.notifications if n["method"] == "notifications/cancelled"]
    assert cancelled["params"]["requestId"] == asked["id"]
