"""The throttle on warnings others can cause at will: a burst, then one an interval,
and each line let through says how many were held back before it."""

from __future__ import annotations

from protocol.pacing.buckets import Bucket, Throttle


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


def test_a_count_told_at_most_so_often_when_many_are_let_through() -> None:
    clock = Clock()
    throttle = Throttle(burst=2, every=0.1, clock=clock, tell_every=10.0)
    assert [throttle.admit() for _ in range(50)] == [0, 0] + [None] * 48
    clock.now = 1.0
    assert throttle.admit() == 48  # the first one let through again tells the count
    assert [throttle.admit() for _ in range(3)] == [0, None, None]
    clock.now = 1.2
    assert throttle.admit() == 0  # two were held back, but the count was told just now
    clock.now = 11.0
    assert throttle.admit() == 2


def test_a_bucket_lets_part_of_a_batch_through_and_counts_the_rest() -> None:
    bucket = Bucket(tokens=5.0, stamp=0.0)
    assert bucket.take_some(0.0, burst=5, rate=2.0, wanted=8) == 5
    assert bucket.suppressed == 3
    assert bucket.take_some(1.0, burst=5, rate=2.0, wanted=8) == 2  # refilled at its rate
    assert bucket.take_some(100.0, burst=5, rate=2.0, wanted=1) == 1  # never past its burst
    assert bucket.tokens == 4.0
    assert bucket.suppressed == 9


def test_a_bucket_spent_past_what_it_holds_says_how_long_its_debt_takes_to_pay() -> None:
    bucket = Bucket(tokens=10.0, stamp=0.0)
    assert bucket.spend(0.0, burst=10, rate=5.0, cost=4.0) == 0.0  # within what it holds
    assert bucket.spend(0.0, burst=10, rate=5.0, cost=16.0) == 2.0  # 10 owed, at 5 a second
    assert bucket.spend(1.0, burst=10, rate=5.0, cost=0.0) == 1.0  # half of it paid
    assert bucket.spend(3.0, burst=10, rate=5.0, cost=0.0) == 0.0
    # What is given back fills it, never past its burst.
    assert bucket.spend(3.0, burst=10, rate=5.0, cost=-100.0) == 0.0
    assert bucket.tokens == 10.0
