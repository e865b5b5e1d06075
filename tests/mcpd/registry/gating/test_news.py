"""What the gate tells the journal of one list: each change or finding one record, up
to a few, the rest one count; and nothing a server names an item can break a record
into lines of its own."""

from __future__ import annotations

import logging

import pytest

from mcpd.registry.findings.rules import Finding
from mcpd.registry.gating.news import IN_JOURNAL, News


def records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "mcpd.registry"]


def test_each_change_is_one_record_naming_the_server_the_item_and_what_was_done(
    caplog: pytest.LogCaptureFixture,
) -> None:
    news = News("notes", "prompt")
    with caplog.at_level(logging.INFO, logger="mcpd.registry"):
        news.change("daily", "changed", "hold")
        news.change("weekly", "added", "warn")
        news.change("monthly", "new", "accept")
        news.flush()
    held, warned, accepted = records(caplog)
    assert held.getMessage() == (
        "notes: prompt 'daily': its definition changed since it was approved; "
        "held until `mcpd approve notes`"
    )
    assert held.levelno == logging.WARNING
    assert (held.mcpd_server, held.mcpd_event, held.mcpd_reason) == (
        "notes",
        "definition_changed",
        "changed",
    )
    assert (held.mcpd_item, held.mcpd_kind) == ("daily", "prompt")
    assert warned.getMessage().endswith("taken, as on_new_item = warn says")
    assert warned.levelno == logging.WARNING
    assert accepted.getMessage().endswith("taken, as on_new_item = accept says")
    assert accepted.levelno == logging.INFO


def test_a_list_that_changes_whole_is_a_few_records_and_one_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    news = News("flood", "tool")
    findings = (Finding("hidden-characters", "description", "x"),)
    with caplog.at_level(logging.INFO, logger="mcpd.registry"):
        for i in range(10_000):
            if i % 2:
                news.change(f"t{i}", "changed", "hold")
            else:
                news.finding(f"t{i}", findings)
        news.flush()
    got = records(caplog)
    assert len(got) == IN_JOURNAL + 1
    last = got[-1]
    assert last.getMessage() == (
        f"flood: {10_000 - IN_JOURNAL} more changes or findings in its tool list "
        "(`mcpd tools --pending`, `mcpd tools --findings`)"
    )
    assert (last.mcpd_server, last.mcpd_event, last.mcpd_reason) == (
        "flood",
        "definition_changed",
        "more",
    )
    assert not hasattr(last, "mcpd_item")


def test_a_list_with_nothing_to_say_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="mcpd.registry"):
        News("quiet", "tool").flush()
    assert records(caplog) == []


def test_a_finding_names_every_rule_once_and_where_the_first_was(
    caplog: pytest.LogCaptureFixture,
) -> None:
    findings = (
        Finding("conceal-from-user", "description", "do not tell the user"),
        Finding("hidden-characters", "title", "x"),
        Finding("conceal-from-user", "title", "keep it secret"),
    )
    with caplog.at_level(logging.INFO, logger="mcpd.registry"):
        News("notes", "tool").finding("search", findings)
    [record] = records(caplog)
    assert record.getMessage() == (
        "notes: tool 'search': conceal-from-user, hidden-characters in description: "
        '"do not tell the user" (`mcpd tools --findings`)'
    )
    assert record.mcpd_reason == "conceal-from-user, hidden-characters"
    assert record.mcpd_event == "finding"


def test_instructions_have_no_item_name(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="mcpd.registry"):
        News("notes", "instructions").finding("", (Finding("r", "instructions", "e"),))
    [record] = records(caplog)
    assert record.getMessage().startswith("notes: instructions: r in instructions")
    assert not hasattr(record, "mcpd_item")
    assert record.mcpd_kind == "instructions"


def test_an_items_name_or_excerpt_cannot_start_a_line_of_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    forged = "x\nJan 01 00:00:00 host mcpd[1]: other: approved\r\x1b[2K\x00"
    news = News("notes", "tool")
    with caplog.at_level(logging.INFO, logger="mcpd.registry"):
        news.change(forged, "changed", "hold")
        news.finding(forged, (Finding("r", "description", forged),))
    for record in records(caplog):
        message = record.getMessage()
        assert not any(c in message for c in "\n\r\x1b\x00")
        assert "\\n" in message and "\\x1b" in message
