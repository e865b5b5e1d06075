"""How long a task still running holds its lazy server: until it ended, else for the
server's idle time after the last word of it, and at least for the ttl it was made
with, which counts for no more than ``MAX_TTL_HOLD``."""

from __future__ import annotations

import math

import trio
import trio.testing

from mcpd.servers.life.task_holds import MAX_TTL_HOLD, TaskHolds

QUIET = 5.0


async def test_a_task_holds_for_the_quiet_time_after_the_last_word_of_it(
    mock_clock: trio.testing.MockClock,
) -> None:
    holds = TaskHolds()
    assert holds.until(QUIET) == -math.inf
    start = trio.current_time()
    holds.made("t-1", 0.0)
    assert holds.until(QUIET) == start + QUIET
    mock_clock.jump(3.0)
    holds.runs("t-1")
    assert holds.until(QUIET) == start + 3.0 + QUIET


async def test_the_ttl_a_task_was_made_with_holds_it_within_bounds(
    mock_clock: trio.testing.MockClock,
) -> None:
    holds = TaskHolds()
    start = trio.current_time()
    holds.made("t-1", 60.0)
    assert holds.until(QUIET) == start + 60.0
    holds.made("t-2", 1e12)  # a server asking to be kept up for ever
    assert holds.until(QUIET) == start + MAX_TTL_HOLD


async def test_a_task_that_ended_holds_nothing_and_says_so() -> None:
    holds = TaskHolds()
    told: list[str] = []
    holds.on_end = lambda: told.append("ended")
    holds.made("t-1", 60.0)
    holds.ended("t-1")
    holds.ended("t-1")  # once is enough to be told
    assert holds.until(QUIET) == -math.inf
    assert told == ["ended"]
    holds.runs("t-1")  # news of it after it ended holds nothing again
    assert holds.until(QUIET) == -math.inf
