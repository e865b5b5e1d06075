"""One server's reading budget, without I/O: what answers nothing is read at a rate
(past it a stream is told to wait), messages not yet complete share a bound of
memory (past it a stream waits for another's to complete, one going on past it), and
while either holds the server back, what status shows says why."""

from __future__ import annotations

from protocol.pacing.read_budget import (
    MAX_NOTIFICATION,
    SHOWN_FOR,
    UNIT_BYTES,
    ReadBudget,
    cost,
    oversized,
    skipped,
)

NOTE = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}'


def test_a_message_costs_a_unit_a_line_and_one_each_unit_of_bytes() -> None:
    assert cost(b"") == 1.0
    assert cost(b"x" * UNIT_BYTES) == 2.0
    assert cost(b"{\n}") == 2.0 + 3 / UNIT_BYTES  # data over two lines


def test_bytes_thrown_away_unread_cost_what_as_many_of_a_message_do() -> None:
    assert skipped(0) == 0.0
    assert skipped(3 * UNIT_BYTES) == 3.0
    # A line that never ends, read a pipe's worth at a time: past the burst, wait.
    budget = ReadBudget(max_held=1 << 20, rate=100)
    key = budget.open()
    chunk = skipped(64 * 1024)
    assert budget.pace(0.0, key) == 0.0
    budget.read(0.0, key, chunk)
    assert budget.pace(0.0, key) == 0.0
    budget.read(0.0, key, chunk)
    assert budget.pace(0.0, key) == (2 * chunk - 400) / 100


def test_an_answers_lines_charged_as_they_came_are_given_back_once_it_is_known() -> None:
    # An answer over many lines, read in pieces: its lines were charged (past the burst),
    # and once complete it costs nothing; giving back cannot pass the burst.
    budget = ReadBudget(max_held=1 << 20, rate=100)
    key = budget.open()
    for _ in range(3):
        assert budget.pace(0.0, key) == 0.0
        budget.read(0.0, key, 150.0)
    assert budget.pace(0.0, key) == 0.5
    assert budget.pace(0.5, key) == 0.0
    budget.read(0.5, key, -450.0)
    assert budget.pace(0.5, key) == 0.0
    budget.read(0.5, key, 400.0)
    assert budget.pace(0.5, key) == 0.0
    budget.read(0.5, key, 100.0)
    assert budget.pace(0.5, key) == 1.0


def test_events_at_the_rate_are_read_without_a_wait() -> None:
    budget = ReadBudget(max_held=1 << 20, rate=100)
    key = budget.open()
    now = 0.0
    units = 10 * cost(NOTE)
    for _ in range(1000):  # ten notes at a time, as often as the rate pays for them
        assert budget.pace(now, key) == 0.0
        budget.read(now, key, units)
        now += units / 100
    assert budget.held_back(now) is None


def test_events_past_the_rate_have_the_reader_told_to_wait_until_they_are_paid_for() -> None:
    budget = ReadBudget(max_held=1 << 20, rate=100)
    key = budget.open()
    assert budget.pace(0.0, key) == 0.0
    budget.read(0.0, key, 400.0)  # the whole burst, four seconds' worth
    assert budget.pace(0.0, key) == 0.0
    budget.read(0.0, key, 250.0)
    wait = budget.pace(0.0, key)
    assert wait == 2.5  # 250 units over the burst, at 100 a second
    assert budget.pace(1.0, key) == 1.5
    assert budget.pace(2.5, key) == 0.0


def test_what_answered_a_request_costs_nothing_however_much_there_is() -> None:
    budget = ReadBudget(max_held=1 << 20, rate=100)
    key = budget.open()
    for _ in range(10_000):
        assert budget.pace(0.0, key) == 0.0
        budget.read(0.0, key, 0.0)


def test_streams_told_to_wait_do_not_all_read_when_the_wait_ends() -> None:
    budget = ReadBudget(max_held=1 << 20, rate=100)
    first, second = budget.open(), budget.open()
    for key in (first, second):
        budget.pace(0.0, key)
        budget.read(0.0, key, 300.0)  # each read costs as much as the last one
    wait = budget.pace(0.0, first)
    assert wait == budget.pace(0.0, second) == 2.0
    # The first to read sets aside what its read will likely cost: the second waits on.
    assert budget.pace(wait, first) == 0.0
    assert budget.pace(wait, second) == 3.0
    budget.read(wait, first, 300.0)
    assert budget.pace(wait, second) == 3.0


def test_past_the_bytes_held_at_once_a_stream_waits_until_another_completes() -> None:
    budget = ReadBudget(max_held=1000, rate=100)
    a, b, c = budget.open(), budget.open(), budget.open()
    budget.hold(a, 600)
    assert budget.may_read(a)
    budget.hold(b, 600)
    # Past the bound: one stream may go on past it, so that its message completes...
    assert budget.may_read(b)
    # ...and no other, whether it holds part of a message or none.
    budget.hold(c, 10)
    assert not budget.may_read(c)
    assert not budget.may_read(a)
    assert budget.may_read(b)
    # The one past it completes its message: that makes room, and the others go on.
    assert budget.hold(b, 0) is True
    assert budget.may_read(a) and budget.may_read(c)


def test_a_stream_that_ends_makes_room() -> None:
    budget = ReadBudget(max_held=1000, rate=100)
    a, b = budget.open(), budget.open()
    budget.hold(a, 900)
    budget.hold(b, 900)
    assert budget.may_read(a) and not budget.may_read(b)
    assert budget.close(a) is True
    assert budget.may_read(b)


def test_holding_back_is_shown_with_why_while_it_lasts() -> None:
    budget = ReadBudget(max_held=1000, rate=100)
    assert budget.held_back(0.0) is None
    assert budget.note(5.0, "pace") is True  # it begins: worth saying
    assert budget.note(6.0, "pace") is False
    held = budget.held_back(7.0)
    assert held is not None and held.since == 5.0
    assert "answers no request" in held.reason and "100 lines" in held.reason
    budget.note(8.0, "room")
    held = budget.held_back(8.0)
    assert held is not None and held.since == 5.0
    assert "1,000 bytes of messages not yet complete" in held.reason
    assert budget.held_back(8.0 + SHOWN_FOR + 0.1) is None
    assert budget.note(30.0, "pace") is True  # a new spell


def test_a_notification_larger_than_any_of_its_kind_needs_is_oversized() -> None:
    big = b"x" * (MAX_NOTIFICATION + 1)
    assert oversized("notifications/message", big)
    assert oversized("notifications/progress", big)
    assert not oversized("notifications/message", big[:MAX_NOTIFICATION])
    assert not oversized("notifications/message", None)
    # A task's news may carry a call's result.
    assert not oversized("notifications/tasks", big)
