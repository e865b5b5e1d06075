"""A server's heap of call deadlines on its own: only a running call whose deadline is
still the one set is due, the entries of ended calls do not pile up, and the timer
sleeps until the first deadline unless an earlier one comes."""

from __future__ import annotations

import math

import trio
import trio.testing

from mcpd.servers.calling.calls import Call
from mcpd.servers.calling.deadlines import Deadlines
from tests.support.parts.calls import a_call


def running(name: str) -> Call:
    call, _ = a_call(name)
    call.state = "running"
    return call


def test_only_running_calls_whose_time_is_up_are_due_each_once() -> None:
    deadlines = Deadlines(live=lambda: 1)
    early, late, ended = running("early"), running("late"), running("ended")
    deadlines.set(early, 1.0)
    deadlines.set(late, 5.0)
    deadlines.set(ended, 2.0)
    ended.state = "done"
    assert list(deadlines.due(3.0)) == [early]
    assert list(deadlines.due(3.0)) == []
    assert list(deadlines.due(5.0)) == [late]


def test_a_moved_deadline_is_due_at_its_new_time_not_its_old() -> None:
    deadlines = Deadlines(live=lambda: 1)
    call = running("extended")
    deadlines.set(call, 1.0)
    deadlines.set(call, 4.0)
    assert list(deadlines.due(2.0)) == []
    assert list(deadlines.due(4.0)) == [call]


def test_the_entries_of_ended_calls_do_not_pile_up() -> None:
    deadlines = Deadlines(live=lambda: 1)
    for n in range(1000):
        call = running(f"t{n}")
        deadlines.set(call, 60.0 + n)
        call.state = "done"  # ended long before its deadline
    live = running("live")
    deadlines.set(live, 30.0)
    assert len(deadlines._heap) <= 70
    deadlines.drop_ended()
    assert list(deadlines.due(math.inf)) == [live]


def test_ended_calls_first_in_the_heap_are_dropped_and_a_live_one_kept() -> None:
    deadlines = Deadlines(live=lambda: 1)
    first, second = running("first"), running("second")
    deadlines.set(first, 1.0)
    deadlines.set(second, 2.0)
    first.state = "done"
    deadlines.drop_ended()
    assert [entry[2] for entry in deadlines._heap] == [second]


async def test_the_timer_sleeps_to_the_first_deadline_and_wakes_for_an_earlier(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deadlines = Deadlines(live=lambda: 1)
    deadlines.set(running("late"), 100.0)
    woke: list[float] = []

    async def timer() -> None:
        await deadlines.sleep(queued=50.0)
        woke.append(trio.current_time())
        await deadlines.sleep(queued=math.inf)
        woke.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(timer)
        await trio.sleep(10.0)
        deadlines.coming(70.0)  # later than the timer sleeps until: no wake
        await trio.sleep(10.0)
        deadlines.coming(30.0)
    assert woke == [20.0, 100.0]
