"""The per-server budget for what servers say (``StderrRateLimiter``), on records made
directly with a clock the test moves: what it limits and what it never does, the lines
it counts, and the summaries that say so (a few, and the ones left at shutdown)."""

from __future__ import annotations

import logging
from typing import Any

from mcpd.local.service.ratelimit import SUMMARY_EVERY, StderrRateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def record(
    msg: str, server: str | None = "s", event: str | None = "stderr", **more: Any
) -> logging.LogRecord:
    fields: dict[str, Any] = {"name": "mcpd.stdio", "msg": msg, **more}
    if server is not None:
        fields["mcpd_server"] = server
    if event is not None:
        fields["mcpd_event"] = event
    return logging.makeLogRecord(fields)


def said(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records]


def test_a_servers_stderr_and_log_messages_share_its_budget() -> None:
    limiter = StderrRateLimiter(burst=2, rate=1.0, clock=Clock())
    assert said(limiter.admit(record("a"))) == ["a"]
    assert said(limiter.admit(record("b", event="message"))) == ["b"]
    assert limiter.admit(record("c")) == []
    assert limiter.admit(record("d", event="message")) == []


def test_each_server_has_a_budget_of_its_own() -> None:
    limiter = StderrRateLimiter(burst=1, rate=1.0, clock=Clock())
    assert said(limiter.admit(record("a", server="one"))) == ["a"]
    assert limiter.admit(record("b", server="one")) == []
    assert said(limiter.admit(record("c", server="two"))) == ["c"]


def test_other_records_and_counts_already_made_always_pass() -> None:
    limiter = StderrRateLimiter(burst=1, rate=0.001, clock=Clock())
    limiter.admit(record("spend"))
    for event in ("outage", None):
        assert said(limiter.admit(record("x", event=event))) == ["x"]
    summed = record("held", mcpd_suppressed=40)
    assert limiter.admit(summed) == [summed]


def test_what_was_held_back_is_summed_up_in_lines_before_the_next_admitted() -> None:
    clock = Clock()
    limiter = StderrRateLimiter(burst=1, rate=1.0, clock=clock)
    limiter.admit(record("first"))
    limiter.admit(record("two\nlines"))
    limiter.admit(record("one"))
    clock.now += 1
    summary, admitted = limiter.admit(record("next"))
    assert summary.getMessage() == "3 lines of output from s suppressed"
    assert (summary.levelno, summary.name) == (logging.WARNING, "mcpd.stdio")
    assert summary.__dict__["mcpd_suppressed"] == 3
    assert summary.__dict__["mcpd_server"] == "s"
    assert admitted.getMessage() == "next"


def test_under_a_flood_a_summary_comes_once_in_a_while_not_before_each_record() -> None:
    clock = Clock()
    limiter = StderrRateLimiter(burst=1, rate=1.0, clock=clock)
    summaries = 0
    for _ in range(int(SUMMARY_EVERY * 3)):
        for msg in ("a", "b"):
            out = limiter.admit(record(msg))
            summaries += sum("suppressed" in m for m in said(out))
        clock.now += 1
    assert 2 <= summaries <= 4


def test_a_record_without_its_server_is_counted_under_a_question_mark() -> None:
    limiter = StderrRateLimiter(burst=1, rate=1.0, clock=Clock())
    limiter.admit(record("a", server=None))
    limiter.admit(record("b", server=None))
    assert said(limiter.pending_summaries()) == ["1 lines of output from ? suppressed"]


def test_at_shutdown_the_summaries_left_are_given_once() -> None:
    limiter = StderrRateLimiter(burst=1, rate=1.0, clock=Clock())
    for server in ("one", "two", "calm"):
        limiter.admit(record("a", server=server))
    limiter.admit(record("b", server="one"))
    limiter.admit(record("c\nd", server="two"))
    assert said(limiter.pending_summaries()) == [
        "1 lines of output from one suppressed",
        "2 lines of output from two suppressed",
    ]
    assert limiter.pending_summaries() == []
