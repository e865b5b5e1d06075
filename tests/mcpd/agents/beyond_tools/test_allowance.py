"""An agent's share of matching: costly routes by the hundred wait for the agent's
next second, cheap ones never wait, and another agent's share is its own."""

from __future__ import annotations

import trio
import trio.testing

from mcpd.agents.beyond_tools.allowance import AGENT_STEPS, Allowance
from mcpd.registry.uris.claims import ROUTE_STEPS


async def test_costly_routes_wait_for_the_agents_next_second(
    autojump_clock: trio.testing.MockClock,
) -> None:
    hog, other = Allowance(), Allowance()
    start = trio.current_time()
    served: list[float] = []

    async def costly() -> None:
        budget = await hog.take()
        budget.spend(budget.left)  # a URI that takes a route's whole budget
        hog.give_back(budget)
        served.append(trio.current_time() - start)

    async with trio.open_nursery() as nursery:
        for _ in range(120):
            nursery.start_soon(costly)
        await trio.sleep(0.5)
        # Meanwhile another agent's route is not held up by the first one's.
        await other.take()
        assert trio.current_time() - start == 0.5
    per_second = AGENT_STEPS // ROUTE_STEPS
    for second in range(int(max(served)) + 1):
        assert len([t for t in served if second <= t < second + 1]) <= per_second
    assert len(served) == 120 and max(served) >= 120 // per_second - 1


async def test_cheap_routes_never_wait(autojump_clock: trio.testing.MockClock) -> None:
    agent = Allowance()
    start = trio.current_time()
    for _ in range(1000):
        budget = await agent.take()
        budget.spend(50)
        agent.give_back(budget)
    assert trio.current_time() == start


async def test_what_cannot_wait_gets_what_is_left(autojump_clock: trio.testing.MockClock) -> None:
    agent = Allowance()
    spent = await agent.take()
    spent.spend(spent.left)
    agent.give_back(spent)
    left = agent.now()
    assert left.left == AGENT_STEPS - ROUTE_STEPS
    left.spend(left.left)
    agent.give_back(left)
    assert agent.now().left == 0  # a listen's URIs are then not honoured
    await trio.sleep(1)
    assert agent.now().left == ROUTE_STEPS
