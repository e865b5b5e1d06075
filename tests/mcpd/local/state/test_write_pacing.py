"""When a state file is written again: soon after a change, while changes keep coming
no more often than its size allows, always with the latest state last, and once more
when mcpd stops with a change not written yet."""

from __future__ import annotations

import itertools

import trio
import trio.lowlevel
import trio.testing

from mcpd.local.state.write_pacing import RATE, SPACING, PacedWrites

EPSILON = 1e-6  # the clock's seconds are floats


class File:
    """A state file written through ``PacedWrites``: what each write held, and when."""

    def __init__(self, size: int = 1000, fails: int = 0) -> None:
        self.paced = PacedWrites()
        self.state = 0
        self.writes: list[tuple[float, int]] = []
        self.size = size
        self.fails = fails

    def change(self) -> None:
        self.state += 1
        self.paced.changed()

    async def write(self) -> None:
        self.paced.begin()
        await trio.lowlevel.checkpoint()  # as a write in a thread lets others run
        if self.fails:
            self.fails -= 1
            self.paced.failed()
            return
        self.writes.append((trio.current_time(), self.state))
        self.paced.done(self.size)


async def test_changes_that_keep_coming_are_written_spaced_out_the_latest_last(
    autojump_clock: trio.testing.MockClock,
) -> None:
    f = File()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(f.paced.run, f.write)
        for _ in range(180):  # three a second, for a minute
            f.change()
            await trio.sleep(1 / 3)
        await trio.sleep(60)
        nursery.cancel_scope.cancel()
    times = [at for at, _ in f.writes]
    assert all(b - a >= SPACING - EPSILON for a, b in itertools.pairwise(times))
    assert len(times) <= 60 / SPACING + 2
    assert f.writes[-1][1] == 180  # the last state, written once the changes stopped
    assert [state for _, state in f.writes].count(180) == 1  # and not again on stop


async def test_a_change_after_a_quiet_time_is_written_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    f = File()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(f.paced.run, f.write)
        f.change()
        await trio.sleep(60)
        start = trio.current_time()
        f.change()
        await trio.sleep(2)
        nursery.cancel_scope.cancel()
    assert f.writes[-1][0] - start < 1
    assert f.writes[-1][1] == 2


async def test_a_large_file_is_written_less_often(autojump_clock: trio.testing.MockClock) -> None:
    size = 64 * 1024 * 1024
    f = File(size=size)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(f.paced.run, f.write)
        for _ in range(180):
            f.change()
            await trio.sleep(1 / 3)
        nursery.cancel_scope.cancel()
    times = [at for at, _ in f.writes][:-1]  # the last one on the stop, paced or not
    assert len(times) >= 3
    assert size / RATE > SPACING
    assert all(b - a >= size / RATE - EPSILON for a, b in itertools.pairwise(times))


async def test_a_stop_writes_what_is_not_written_yet_and_nothing_else(
    autojump_clock: trio.testing.MockClock,
) -> None:
    f = File()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(f.paced.run, f.write)
        f.change()
        await trio.sleep(1)
        f.change()  # within the spacing: not written before the stop
        nursery.cancel_scope.cancel()
    assert [state for _, state in f.writes] == [1, 2]
    idle = File()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(idle.paced.run, idle.write)
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert idle.writes == []


async def test_a_write_that_failed_is_tried_again(autojump_clock: trio.testing.MockClock) -> None:
    f = File(fails=2)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(f.paced.run, f.write)
        f.change()
        await trio.sleep(3 * SPACING)
        assert [state for _, state in f.writes] == [1]
        nursery.cancel_scope.cancel()
    assert len(f.writes) == 1


async def test_a_file_that_says_when_it_was_written_is_written_on_a_stop_in_any_case(
    autojump_clock: trio.testing.MockClock,
) -> None:
    f = File()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: f.paced.run(f.write, final=True))
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert [state for _, state in f.writes] == [0]
