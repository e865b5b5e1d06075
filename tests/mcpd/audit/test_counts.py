"""The audit's counters as ``GET /metrics`` shows them: calls by server, method,
outcome and decision; what a reader of some servers only is shown (never the daemon's
own counters, never another server's calls); and the approvals waiting."""

from __future__ import annotations

from typing import Any

import msgspec

from mcpd.audit.counts import CallCounts, render_call_metrics
from mcpd.audit.record import CallRecord


def record(**kw: Any) -> CallRecord:
    base = {
        "ts": 0.0,
        "agent": {},
        "method": "tools/call",
        "outcome": "ok",
        "server": "gh",
        "decision": "allow",
    }
    return msgspec.convert({**base, **kw}, CallRecord)


def counted(*records: CallRecord) -> CallCounts:
    counts = CallCounts()
    for r in records:
        counts.add(r)
    return counts


def samples_of(lines: list[str], name: str) -> list[str]:
    return [line for line in lines if line.startswith(name + "{") or line.startswith(name + " ")]


def test_calls_are_counted_by_server_method_outcome_and_decision() -> None:
    counts = counted(
        record(),
        record(),
        record(outcome="refused", decision="deny"),
        record(server="notes", method="resources/read"),
        record(server=None, outcome="refused", decision="none"),  # named no tool mcpd knows
    )
    assert counts.samples() == [
        (("", "tools/call", "refused", "none"), 1),
        (("gh", "tools/call", "ok", "allow"), 2),
        (("gh", "tools/call", "refused", "deny"), 1),
        (("notes", "resources/read", "ok", "allow"), 1),
    ]


def test_a_reader_of_some_servers_sees_theirs_and_the_calls_of_no_server() -> None:
    counts = counted(record(), record(server="notes"), record(server=None))
    assert [key[0] for key, _ in counts.samples(lambda alias: alias == "notes")] == ["", "notes"]
    assert [key[0] for key, _ in counts.samples(lambda alias: False)] == [""]


def test_the_owner_is_shown_every_family_in_the_text_format() -> None:
    counts = counted(record(), record(), record(outcome="timeout"))
    counts.dropped, counts.write_errors = 3, 1
    lines = render_call_metrics(counts, pending=2)
    assert samples_of(lines, "mcpd_calls_total") == [
        'mcpd_calls_total{server="gh",method="tools/call",outcome="ok",decision="allow"} 2',
        'mcpd_calls_total{server="gh",method="tools/call",outcome="timeout",decision="allow"} 1',
    ]
    assert samples_of(lines, "mcpd_approvals_pending") == ["mcpd_approvals_pending 2"]
    assert samples_of(lines, "mcpd_audit_dropped_total") == ["mcpd_audit_dropped_total 3"]
    assert samples_of(lines, "mcpd_audit_write_errors_total") == ["mcpd_audit_write_errors_total 1"]
    # Each family is announced once, before its samples.
    types = [line for line in lines if line.startswith("# TYPE ")]
    assert types == [
        "# TYPE mcpd_calls_total counter",
        "# TYPE mcpd_approvals_pending gauge",
        "# TYPE mcpd_audit_dropped_total counter",
        "# TYPE mcpd_audit_write_errors_total counter",
    ]
    for line in lines:
        assert line.startswith("#") or line.rsplit(" ", 1)[1].isdigit(), line


def test_a_reader_of_some_servers_is_not_shown_the_daemons_own_counters() -> None:
    counts = counted(record(), record(server="notes"))
    counts.dropped = 9
    lines = render_call_metrics(counts, pending=0, only=lambda alias: alias == "notes")
    assert samples_of(lines, "mcpd_calls_total") == [
        'mcpd_calls_total{server="notes",method="tools/call",outcome="ok",decision="allow"} 1'
    ]
    assert not [line for line in lines if "mcpd_audit_" in line]
    assert samples_of(lines, "mcpd_approvals_pending") == ["mcpd_approvals_pending 0"]


def test_no_calls_yet_still_announces_the_families() -> None:
    lines = render_call_metrics(CallCounts(), pending=0)
    assert "# TYPE mcpd_calls_total counter" in lines
    assert samples_of(lines, "mcpd_calls_total") == []
    assert samples_of(lines, "mcpd_audit_dropped_total") == ["mcpd_audit_dropped_total 0"]


def test_a_label_value_cannot_break_out_of_its_quotes() -> None:
    counts = counted(record(server='a"b\\c\nd'))
    [sample] = samples_of(render_call_metrics(counts, pending=0), "mcpd_calls_total")
    assert sample.startswith('mcpd_calls_total{server="a\\"b\\\\c\\nd",method=')
    assert "\n" not in sample
