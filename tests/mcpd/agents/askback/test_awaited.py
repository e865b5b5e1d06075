"""Where a call's outcome goes that a task of an agent's request waits for
(``Awaited``): each round's handed over once, whenever it comes, to the task awaiting it."""

from __future__ import annotations

from typing import Any, cast

import trio
import trio.testing
from msgspec import Raw

from mcpd.agents.agent import AgentCall
from mcpd.agents.askback.awaited import Awaited
from protocol.jsonrpc import messages as rpc


def awaited() -> Awaited:
    return Awaited()


NO_CALL = cast(AgentCall, cast(Any, None))


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


async def test_each_rounds_outcome_is_had_once_and_the_next_awaited_anew() -> None:
    caller = awaited()
    first, second = Raw(b'{"content":[]}'), rpc.RPCError(-32000, "gone")
    caller.finish(NO_CALL, first)
    got: list[object] = []

    async def wait() -> None:
        got.append(await caller.outcome())
        got.append(await caller.outcome())

    with trio.fail_after(1):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            assert got == [first]  # the second round's is not the first's again
            caller.finish(NO_CALL, second)
    assert got == [first, second]
