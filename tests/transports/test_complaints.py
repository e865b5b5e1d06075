"""The budget for warnings about what one server sends: a burst, then one a second,
and the next one let through says how many were held back."""

from __future__ import annotations

import trio
import trio.testing

from transports.complaints import BURST, Complaints


async def test_complaints_come_in_a_burst_then_one_a_second_with_a_count(
    autojump_clock: trio.testing.MockClock,
) -> None:
    complaints = Complaints()
    said = [complaints.admit() for _ in range(BURST + 5)]
    assert said[:BURST] == [""] * BURST
    assert said[BURST:] == [None] * 5
    await trio.sleep(1.0)
    assert complaints.admit() == " (5 more like this not logged)"
    assert complaints.admit() is None
