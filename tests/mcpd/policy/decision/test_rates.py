"""Per-rule rate limits, on a clock the tests move: a rule's whole count at once, then
an even refill; the wait a refused call is told, and that waiting it out is enough;
agents and rules counted apart, however many connections an agent opens; a reload that
changes a rate; and what is forgotten when many agents come and go."""

from __future__ import annotations

import pytest

from mcpd.config.tables.policy import Rate, parse_rate
from mcpd.policy.agent import AgentInfo
from mcpd.policy.decision.rates import MAX_BUCKETS, PRUNE_AT, RateLimits
from mcpd.policy.decision.rules import Decision

# A monotonic clock far from zero, as a long-running machine's is.
START = 3_000_000.0


def rule(rate: str, index: int = 0) -> Decision:
    return Decision(action="allow", rule=index, rate=parse_rate(rate))


def test_a_rules_whole_count_goes_at_once_and_the_next_is_told_its_wait() -> None:
    limits, decision = RateLimits(), rule("3/min")
    assert [limits.admit(decision, "a", START) for _ in range(3)] == [None] * 3
    assert limits.admit(decision, "a", START) == pytest.approx(20.0)
    # Later, less is left to wait; a refused call takes nothing from the bucket.
    assert limits.admit(decision, "a", START + 15) == pytest.approx(5.0)
    assert limits.admit(decision, "a", START + 15) == pytest.approx(5.0)


@pytest.mark.parametrize(
    "rate", ["1/s", "3/s", "7/s", "1/min", "7/min", "13/min", "1/h", "7/h", "3/day", "97/day"]
)
def test_an_agent_that_waits_as_long_as_it_was_told_may_call(rate: str) -> None:
    limits, decision = RateLimits(), rule(rate)
    now = START + 0.123
    calls = parse_rate(rate).calls
    for _ in range(calls):
        assert limits.admit(decision, "a", now) is None
    for _ in range(5):
        wait = limits.admit(decision, "a", now)
        assert wait is not None and wait > 0
        now += wait
        assert limits.admit(decision, "a", now) is None, f"refused again after {wait} s"


def test_the_bucket_refills_evenly_and_never_past_the_rules_count() -> None:
    limits, decision = RateLimits(), rule("10/min")
    for _ in range(10):
        assert limits.admit(decision, "a", START) is None
    # Half a minute brings five calls back, no more.
    now = START + 30
    assert [limits.admit(decision, "a", now) is None for _ in range(6)] == [True] * 5 + [False]
    # A day idle fills it to the rule's count, not a day's worth.
    now += 86400
    assert [limits.admit(decision, "a", now) is None for _ in range(11)] == [True] * 10 + [False]


def test_agents_are_counted_apart_and_one_process_is_one_agent_however_it_connects() -> None:
    limits, decision = RateLimits(), rule("2/h")
    # One process opening connection after connection is one agent.
    conns = [AgentInfo(pid=4242, connection=f"c{i}") for i in range(5)]
    admitted = [limits.admit(decision, a.key, START) is None for a in conns]
    assert admitted == [True, True, False, False, False]
    # Another process has its own count; agents over TCP share one, however they connect.
    assert limits.admit(decision, AgentInfo(pid=4243, connection="c0").key, START) is None
    tcp = [AgentInfo(connection=f"http-{i}") for i in range(3)]
    assert [limits.admit(decision, a.key, START) is None for a in tcp] == [True, True, False]


def test_each_rule_keeps_its_own_count_for_an_agent() -> None:
    limits = RateLimits()
    first, second = rule("1/min", 0), rule("1/min", 1)
    assert limits.admit(first, "a", START) is None
    assert limits.admit(first, "a", START) is not None
    assert limits.admit(second, "a", START) is None


def test_a_call_without_a_rate_or_a_rule_is_never_counted() -> None:
    limits = RateLimits()
    for decision in (Decision(action="allow"), Decision(action="allow", rule=3)):
        for _ in range(1000):
            assert limits.admit(decision, "a", START) is None
    # A rate that came with no rule (the default decision) counts nothing either.
    assert limits.admit(Decision(action="allow", rate=Rate(1, 60.0)), "a", START) is None
    assert len(limits) == 0


def test_a_reloaded_rule_with_a_new_rate_counts_afresh_under_it() -> None:
    limits = RateLimits()
    assert limits.admit(rule("1/h"), "a", START) is None
    assert limits.admit(rule("1/h"), "a", START) == pytest.approx(3600.0)
    # The same rule now allows 5 a minute: the agent gets that, not the old hour's wait.
    faster = rule("5/min")
    assert [limits.admit(faster, "a", START + 1) is None for _ in range(6)] == [True] * 5 + [False]


def test_agents_that_came_and_went_are_forgotten_but_not_one_still_limited() -> None:
    limits = RateLimits()
    slow, fast = rule("1/day", 0), rule("1000/s", 1)
    assert limits.admit(slow, "limited", START) is None
    assert limits.admit(slow, "limited", START) is not None
    for i in range(PRUNE_AT):
        assert limits.admit(fast, f"conn:{i}", START) is None
    assert len(limits) == PRUNE_AT + 1
    # A second on, every passing agent's bucket is full again: new agents coming drop
    # them. The limited agent's bucket stays: making others call cannot reset it.
    for i in range(PRUNE_AT * 2):
        assert limits.admit(fast, f"new:{i}", START + 1) is None
    assert len(limits) == PRUNE_AT * 2 + 1  # the new ones and the limited one alone
    assert limits.admit(slow, "limited", START + 1) == pytest.approx(86399.0)


def test_agents_that_all_still_count_are_kept_within_a_bound_newest_first() -> None:
    limits = RateLimits()
    daily = rule("1/day")
    # Each connection of a token holder is an agent; a day's rule keeps every one.
    for i in range(MAX_BUCKETS + 1000):
        assert limits.admit(daily, f"conn:{i}", START) is None
        assert len(limits) <= MAX_BUCKETS
    # The latest still count: no way to a fresh allowance by making agents.
    assert limits.admit(daily, f"conn:{MAX_BUCKETS + 999}", START) is not None
