"""The caller of a call a task of an agent's request waits for (``Awaited``): the
outcome handed over once, whenever it comes, to the task awaiting it; whose the call is
being its agent's."""

from __future__ import annotations

from typing import Any, cast

import trio
import trio.testing
from msgspec import Raw

from mcpd.agents.agent import Agent
from mcpd.agents.askback.awaited import Awaited
from mcpd.servers.calls import Call, Whose
from protocol import jsonrpc as rpc

WHOSE = Whose(uid=1000, pid=42, own=False)


class Agentish:
    def whose(self) -> Whose:
        return WHOSE


def awaited() -> Awaited:
    return Awaited(cast(Agent, Agentish()))


NO_CALL = cast(Call, cast(Any, None))


def test_whose_the_call_is_is_its_agents() -> None:
    assert awaited().whose() == WHOSE


async def test_an_outcome_that_came_first_is_had_at_once() -> None:
    caller = awaited()
    answer = Raw(b'{"content":[]}')
    caller.finish(NO_CALL, answer)
    with trio.fail_after(1):
        assert await caller.outcome() is answer


async def test_the_task_waits_until_the_outcome_comes() -> None:
    caller = awaited()
    got: list[object] = []

    async def wait() -> None:
        got.append(await caller.outcome())

    failure = rpc.RPCError(-32000, "gone")
    with trio.fail_after(1):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            assert got == []
            caller.finish(NO_CALL, failure)
    assert got == [failure]
