"""The calls waiting for a server's slot: taken in turns by owner, while the earliest
arrival, whose deadline comes first, stays at the front for the timer; a call leaving
out of its turn (cancelled, timed out, pushed out) leaves the turns in step; and
through a running daemon, one agent's queued calls do not hold another's back."""

from __future__ import annotations

from pathlib import Path

import trio

from mcpd.servers.calling.calls import Call
from mcpd.servers.calling.turns import TurnQueue
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.parts.calls import a_call
from tests.support.system.procs import scripted


def queued(q: TurnQueue, owner: object, *names: str) -> list[Call]:
    calls = []
    for name in names:
        call, _ = a_call(name)
        call.owner = owner
        q.append(call)
        calls.append(call)
    return calls


def take_all(q: TurnQueue) -> list[str]:
    return [q.take().name for _ in range(len(q))]


def test_one_owner_is_served_in_arrival_order() -> None:
    q = TurnQueue()
    queued(q, "a", "a1", "a2", "a3")
    assert q.held() == {"a": 3}
    assert take_all(q) == ["a1", "a2", "a3"]
    assert q.held() == {} and len(q) == 0


def test_owners_take_turns_the_newcomer_first() -> None:
    q = TurnQueue()
    queued(q, "a", "a1", "a2", "a3")
    queued(q, "b", "b1", "b2")
    queued(q, "c", "c1")
    assert q.held() == {"a": 3, "b": 2, "c": 1}
    assert take_all(q) == ["b1", "a1", "c1", "b2", "a2", "a3"]


def test_the_first_arrival_stays_first_for_deadlines() -> None:
    q = TurnQueue()
    (a1,) = queued(q, "a", "a1")
    queued(q, "b", "b1")
    assert q.take().name == "b1"
    assert q.first() is a1 and q.last() is a1


def test_calls_leaving_out_of_turn_keep_the_turns_in_step() -> None:
    q = TurnQueue()
    a1, _ = queued(q, "a", "a1", "a2")
    (b1,) = queued(q, "b", "b1")
    queued(q, "c", "c1")
    q.remove(b1)  # cancelled: b has no turn left
    assert q.pop_first() is a1  # timed out, in arrival order
    assert q.held() == {"a": 1, "c": 1}
    assert take_all(q) == ["a2", "c1"]
    assert len(q) == 0
    # Back to one owner: plain order again, and a newcomer is let in first.
    queued(q, "a", "a3", "a4")
    queued(q, "d", "d1")
    assert take_all(q) == ["d1", "a3", "a4"]


def test_the_newest_of_an_owner_is_found_for_a_push_out() -> None:
    q = TurnQueue()
    queued(q, "a", "a1")
    queued(q, "b", "b1")
    (a2,) = queued(q, "a", "a2")
    assert q.newest_of("a") is a2
    q.remove(a2)
    assert take_all(q) == ["b1", "a1"]


async def test_through_a_daemon_another_agent_waits_for_one_call_not_all_queued(
    tmp_path: Path,
) -> None:
    """An agent that queued five slow calls at a one-at-a-time server: another agent's
    call is sent as soon as the one running ends, not after the five."""
    cmd, args = scripted("--names", "echo", "--slow", "0.3")
    server = {"command": cmd, "args": list(args), "max_concurrency": 1}
    cfg = make_config(tmp_path, {"s": server}, health_interval=0)
    finished: list[str] = []

    async def call(agent: Agent, who: str) -> None:
        result = await agent.call("mcp__s__echo", {"text": who})
        assert not result.get("isError"), result
        finished.append(who)

    with trio.fail_after(60):
        async with (
            running(cfg) as daemon,
            connect(daemon.socket_path) as busy,
            connect(daemon.socket_path) as other,
            trio.open_nursery() as nursery,
        ):
            for i in range(6):
                nursery.start_soon(call, busy, f"busy{i}")
            while await waiting(other) < 5:
                await trio.sleep(0.01)
            nursery.start_soon(call, other, "other")
    assert finished.index("other") == 1, finished


async def waiting(agent: Agent) -> int:
    status = await agent.result("mcpd/status")
    [server] = status["servers"]
    return int(server["waiting"])
