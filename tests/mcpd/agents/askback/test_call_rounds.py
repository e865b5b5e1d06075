"""A call awaited in a task of its request (``CallRounds``), on a ``Router`` with no
server behind it: the test answers for the server."""

from __future__ import annotations

import json

import trio
import trio.testing
from msgspec import Raw

from mcpd.agents.agent import AgentCall
from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from tests.support.parts.routing import StandInAgent, World


def request(rid: int, name: str) -> rpc.Request:
    msg = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name}}
    decoded = envelope.decode_message(json.dumps(msg).encode())
    assert isinstance(decoded, rpc.Request)
    return decoded


async def test_an_awaited_call_is_answered_with_its_servers_result_and_recorded_once() -> None:
    world = World()
    caller = StandInAgent(world.profile)
    call = world.router.call_of(caller, request(7, world.local("notes", "search")))
    replies: list[bytes] = []

    async def run(call: AgentCall) -> None:
        replies.append(await world.router.serve(call))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, call)
            await trio.testing.wait_all_tasks_blocked()
            assert world.servers.started == [call.out] and call.out.original == "search"
            world.servers.answer(Raw(b'{"content":[{"type":"text","text":"found"}]}'))
    [reply] = replies
    assert json.loads(reply)["result"]["content"] == [{"type": "text", "text": "found"}]
    assert world.audit.outcomes() == [(call.out.name, "ok")]


async def test_a_call_nobody_decides_in_time_never_reaches_its_server(
    autojump_clock: trio.testing.MockClock,
) -> None:
    world = World({"action": "ask", "servers": ["notes"], "timeout": 1})
    caller = StandInAgent(world.profile)
    call = world.router.call_of(caller, request(8, world.local("notes", "add")))
    replies: list[bytes] = []

    async def run() -> None:
        replies.append(await world.router.serve(call))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
    assert world.servers.started == []
    [reply] = replies
    result = json.loads(reply)["result"]
    assert result["isError"] is True and "Nobody approved" in result["content"][0]["text"]
