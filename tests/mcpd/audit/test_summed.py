"""Requests mcpd refused before any server or rule saw them: each agent (its uid, pid
and program) has a budget of them written one by one, a burst and then a rate, which
another agent's flood does not spend, and each user one for its processes together,
which a flood spread over many processes does not get past; past it they are counted,
one summary per agent, method and outcome a batch, that says how many, the first's name
and reason, from when to when and their sizes added up; and the log says so once in a
while, not each time."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcpd.audit import summed
from mcpd.audit.record import CallRecord
from mcpd.audit.summed import BURST, RATE, USER_BURST, USER_RATE, WARN_EVERY, Summed, finish
from mcpd.policy.agent import AgentInfo

FLOODER = AgentInfo(uid=1000, pid=66, exe="python3", connection="c1")
HONEST = AgentInfo(uid=1000, pid=42, exe="claude", connection="c2")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def refused(n: int, agent: AgentInfo = FLOODER, **kw: Any) -> CallRecord:
    base: dict[str, Any] = {
        "ts": 1_700_000_000.0 + n / 100,
        "agent": agent,
        "method": "tools/call",
        "name": f"x{n}",
        "outcome": "refused",
        "reason": "unknown tool",
        "args_bytes": 2,
        "result_bytes": 100,
    }
    return CallRecord(**{**base, **kw})


def test_each_agent_has_a_burst_then_a_rate_of_its_own() -> None:
    clock = Clock()
    sums = Summed(clock)
    assert all(sums.within_budget(refused(n)) for n in range(BURST))
    assert not sums.within_budget(refused(BURST))
    # Another process, even of the same user, has its whole budget.
    assert all(sums.within_budget(refused(n, HONEST)) for n in range(BURST))
    # The same process on another connection, profile or era is the same agent.
    other_connection = AgentInfo(uid=1000, pid=66, exe="python3", connection="c9", era="modern")
    assert not sums.within_budget(refused(0, other_connection))
    clock.now += 1.0
    admitted = sum(sums.within_budget(refused(n)) for n in range(BURST))
    assert admitted == int(RATE)


def test_a_flood_spread_over_many_processes_is_held_to_its_users_budget() -> None:
    clock = Clock()
    sums = Summed(clock)
    flood = [AgentInfo(uid=1000, pid=10_000 + n, exe="python3") for n in range(1000)]

    def written() -> int:
        return sum(sums.within_budget(refused(0, agent)) for agent in flood for _ in range(3))

    assert written() == USER_BURST
    clock.now += 1.0
    assert written() == int(USER_RATE)
    # Another user's agent has its whole budget.
    other = AgentInfo(uid=1001, pid=7, exe="claude")
    assert all(sums.within_budget(refused(n, other)) for n in range(BURST))


def test_a_process_past_its_own_budget_leaves_its_users_to_the_others() -> None:
    sums = Summed(Clock())
    assert sum(sums.within_budget(refused(n)) for n in range(10 * BURST)) == BURST
    assert all(sums.within_budget(refused(n, HONEST)) for n in range(BURST))


def test_past_the_budget_one_summary_per_agent_method_and_outcome_a_batch() -> None:
    sums = Summed(Clock())
    assert sums.add(refused(1))  # the first since the last batch: the writer has work
    assert not sums.add(refused(2, name="y" * 300, reason="something else"))
    sums.add(refused(3, outcome="error", reason="Invalid params"))
    sums.add(refused(4, method="prompts/get"))
    sums.add(refused(5, HONEST))
    sums.add(refused(6))
    tools, errors, prompts, honest = sums.take()
    assert (tools.agent, tools.method, tools.outcome, tools.count) == (
        FLOODER,
        "tools/call",
        "refused",
        3,
    )
    assert (tools.name, tools.reason) == ("x1", "unknown tool")  # the first's
    assert (tools.ts, tools.last_ts) == (refused(1).ts, refused(6).ts)
    assert (tools.args_bytes, tools.result_bytes) == (6, 300)
    assert (errors.outcome, errors.count, errors.reason) == ("error", 1, "Invalid params")
    assert (prompts.method, prompts.count) == ("prompts/get", 1)
    assert (honest.agent, honest.count) == (HONEST, 1)
    assert sums.take() == []  # the next batch starts again
    assert sums.add(refused(7))


def test_a_summary_is_written_with_its_times() -> None:
    sums = Summed(Clock())
    sums.add(refused(0))
    sums.add(refused(250))
    summaries = sums.take()
    finish(summaries)
    [summary] = summaries
    assert (summary.time, summary.last_time) == (
        "2023-11-14T22:13:20.000Z",
        "2023-11-14T22:13:22.500Z",
    )


def test_budgets_whole_again_are_let_go() -> None:
    """An agent that stopped sending holds no memory once its budget is whole again:
    a daemon that met many agents keeps budgets only for the ones sending now."""
    clock = Clock()
    sums = Summed(clock)
    for pid in range(100):
        sums.within_budget(refused(0, AgentInfo(pid=pid)))
    sums.take()
    assert len(sums._budgets) == 100
    clock.now += 1 / RATE
    sums.take()
    assert sums._budgets == {}


def test_the_log_warns_once_in_a_while_naming_the_largest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    sums = Summed(clock)
    for n in range(5):
        sums.add(refused(n))
    sums.add(refused(9, HONEST, name="\x1b[2Jtypo"))
    with caplog.at_level(logging.WARNING, logger=summed.logger.name):
        sums.warn(sums.take())
        sums.add(refused(10))
        sums.warn(sums.take())  # soon after: not again
        clock.now += WARN_EVERY
        sums.add(refused(11, HONEST, name="\x1b[2Jtypo"))
        sums.warn(sums.take())
    first, second = (r.getMessage() for r in caplog.records)
    assert first.startswith("pid 66 (python3), uid 1000") and ": 5 tools/call requests" in first
    assert "(the first: x0)" in first
    assert "\x1b" not in second and "\\x1b[2Jtypo" in second


def test_a_summary_names_no_server_though_its_first_was_a_held_tools() -> None:
    """A held tool's refusal names its server; the summary it starts counts other
    names too, so a search of the log by that server does not count them as its."""
    sums = Summed(Clock())
    sums.add(refused(1, name="mcp__h__t1", server="h", original="t1", reason="held: changed"))
    sums.add(refused(2))
    [summary] = sums.take()
    assert (summary.name, summary.count, summary.server, summary.original) == (
        "mcp__h__t1",
        2,
        None,
        None,
    )
