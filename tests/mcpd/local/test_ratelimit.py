"""The throttle on warnings others can cause at will: a burst, then one an interval,
and each line let through says how many were held back before it."""

from __future__ import annotations

from mcpd.local.ratelimit import Throttle


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_one_an_interval_with_the_count_held_back() -> None:
    clock = Clock()
    throttle = Throttle(burst=3, every=10.0, clock=clock)
    said = [throttle.admit() for _ in range(100)]
    assert said[:3] == [0, 0, 0]
    assert said[3:] == [None] * 97
    clock.now = 10.0
    assert throttle.admit() == 97  # the next line says how many were not logged
    assert throttle.admit() is None
    clock.now = 15.0
    assert throttle.admit() is None
    clock.now = 20.0
    assert throttle.admit() == 2
