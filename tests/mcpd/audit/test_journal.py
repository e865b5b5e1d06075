"""A call's journal entry and its line are the ones a ``LogRecord`` of it would make,
field for field and byte for byte, whatever the call carried: the audit writer's
shortcuts (a call's fields made without the record, entries encoded whole, times
stamped a batch at a time) change no entry, line or time."""

from __future__ import annotations

import datetime
import gc
import io
import logging
import struct

import pytest

from mcpd.audit import journal as call_journal
from mcpd.audit.record import NAME_KEPT, AuditOutcome, CallRecord, iso, stamp
from mcpd.local.service import journal
from mcpd.local.service.journalfields import MAX_FIELD_BYTES, NOTICE, encode_entry, record_fields
from mcpd.policy.agent import AgentInfo
from protocol.shown.visible import visible

AGENTS = [
    AgentInfo(uid=0, pid=1, exe="claude", profile="default", connection="c1"),
    AgentInfo(uid=None, pid=None, profile="", connection="http-7"),
    AgentInfo(uid=1000, pid=42, exe=None, profile="ops\x1b[31m"),
]


def _records() -> list[CallRecord]:
    out = []
    for i, agent in enumerate(AGENTS):
        outcomes: list[tuple[AuditOutcome, str | None]] = [
            ("ok", None),
            ("refused", "policy[2]: no\nsecond line"),
            ("error", "bad \ud800 surrogate and \u202e bidi"),
            ("tool_error", ""),
        ]
        for outcome, reason in outcomes:
            out.append(
                CallRecord(
                    ts=1_700_000_000.0 + i,
                    agent=agent,
                    method="tools/call",
                    name="mcp__tickets__open\r" if i == 2 else "mcp__echo__echo",
                    original="open" if i != 1 else None,
                    server="tickets" if i != 1 else None,
                    decision="" if i == 1 else "allow",
                    decided_by="policy[0]",
                    outcome=outcome,
                    reason=reason,
                    duration_ms=-0.4 if i == 1 else 12.5,
                )
            )
    return out


@pytest.mark.parametrize("record", _records(), ids=lambda r: f"{r.outcome}-{r.agent.pid}")
def test_a_calls_entry_has_the_fields_its_log_record_would_have(record: CallRecord) -> None:
    # What the journal handler makes of the call's LogRecord, without the source
    # location (a call's record has none).
    expected = [
        (name, value)
        for name, value in record_fields(call_journal.log_record(record, 0.0))
        if name not in ("CODE_FILE", "CODE_LINE", "CODE_FUNC")
    ]
    assert sorted(call_journal.fields(record)) == sorted(expected)
    level = logging.INFO if record.outcome == "ok" else NOTICE
    assert call_journal.log_record(record, 0.0).levelno == level
    assert encode_entry(expected) == _encoded_field_by_field(expected)


def _encoded_field_by_field(fields: list[tuple[str, str]]) -> bytes:
    out = b""
    for name, value in fields:
        data = value.encode("utf-8", "backslashreplace")
        if len(data) > MAX_FIELD_BYTES:
            data = data[:MAX_FIELD_BYTES] + b"\n[... truncated]"
        if b"\n" in data:
            out += name.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
        else:
            out += name.encode() + b"=" + data + b"\n"
    return out


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "",
        "two\nlines",
        "\ud800" * (MAX_FIELD_BYTES // 6),  # at the cap once escaped
        "\ud800" * (MAX_FIELD_BYTES // 6 + 1),  # over it
        "é" * (MAX_FIELD_BYTES // 2 + 1),  # over it in bytes, not in characters
    ],
    ids=["plain", "empty", "newline", "escapes-at-cap", "escapes-over", "utf8-over"],
)
def test_an_entry_is_encoded_as_field_by_field(value: str) -> None:
    fields = [("MESSAGE", "hello"), ("MCPD_REASON", value), ("PRIORITY", "6")]
    data = encode_entry(fields)
    reason = value.encode("utf-8", "backslashreplace")
    if len(reason) > MAX_FIELD_BYTES:
        # Capped, with the marker, in the binary form the marker's line break needs.
        assert b"\nMCPD_REASON\n" in data
        assert b"bytes truncated by mcpd]\nPRIORITY=6\n" in data
        assert len(data) < MAX_FIELD_BYTES + 200
    else:
        assert data == _encoded_field_by_field(fields)


def test_a_batchs_lines_each_have_their_own_level() -> None:
    records = [r for r in _records() if "\n" not in (r.reason or "")]
    out = io.StringIO()
    call_journal.hand_over(journal.LineHandler(out), records, 1_700_000_000.25)
    lines = out.getvalue().split("\n")[:-1]
    stamp = datetime.datetime.fromtimestamp(1_700_000_000).strftime("%Y-%m-%d %H:%M:%S")
    heads = [
        f"{stamp}.250 {'INFO' if r.outcome == 'ok' else 'NOTICE':<8} "
        + ("[tickets] call: " if r.server else "call: ")
        for r in records
    ]
    assert len(lines) == len(heads)
    assert all(line.startswith(head) for line, head in zip(lines, heads, strict=True)), lines
    out = io.StringIO()
    call_journal.hand_over(journal.LineHandler(out, syslog_prefix=True), records, 1_700_000_000.25)
    lines = out.getvalue().split("\n")[:-1]
    assert [line[:3] for line in lines] == ["<6>" if r.outcome == "ok" else "<5>" for r in records]


def test_a_batchs_times_are_those_of_each_record() -> None:
    agent = AGENTS[0]
    times = [1_700_000_000.0, 1_700_000_000.0004, 1_700_000_000.9995, 1_700_000_000.9999996]
    times += [1_700_000_001.5, 1_699_999_999.001, 0.0]
    records = [CallRecord(ts=t, agent=agent, method="tools/call", outcome="ok") for t in times]
    stamp(records)
    assert [r.time for r in records] == [iso(t) for t in times]
    assert records[3].time == "2023-11-14T22:13:21.000Z"  # rounded into the next second


def test_a_reason_with_a_line_break_stays_on_its_calls_line() -> None:
    (forging,) = [r for r in _records()[:4] if "\n" in (r.reason or "")]
    out = io.StringIO()
    call_journal.hand_over(journal.LineHandler(out), [forging], 1.0)
    lines = out.getvalue().split("\n")[:-1]
    assert len(lines) == 1, lines
    assert "no\\nsecond line" in lines[0]


def test_a_line_break_in_a_name_or_reason_is_shown_in_the_journal_message() -> None:
    """journalctl prints each line of a message as a line of its own: one that starts
    with a made-up call of another agent must read as the text it is."""
    forged = "x\nJan 01 00:00:00 host mcpd[1]: tools/call mcp__a__b by pid 1: ok"
    r = CallRecord(ts=1.0, agent=AGENTS[0], method="tools/call", name="t\r\nu",
                   outcome="refused", reason=forged)  # fmt: skip
    fields = dict(call_journal.fields(r))
    message = fields["MESSAGE"]
    assert "\n" not in message and "\r" not in message
    assert "t\\r\\nu" in message and "x\\nJan 01" in message
    other = dict(record_fields(call_journal.log_record(r, 0.0)))
    assert other["MESSAGE"] == message


@pytest.mark.parametrize("brk", ["\n", "\r", "\r\n", "\u2028"])
def test_a_calls_fields_are_one_line_each_whatever_the_names_and_reason_hold(brk: str) -> None:
    """``journalctl --output-fields=MCPD_TOOL`` (and ``-o verbose``) prints a field's
    lines as they are: a tool name or reason with a line break would print lines that
    read as other fields or entries."""
    forged = f"x{brk}MESSAGE=forged outage{brk}MCPD_EVENT=outage"
    agent = AgentInfo(uid=0, pid=1, exe="claude", profile=f"ops{brk}PRIORITY=0")
    r = CallRecord(ts=1.0, agent=agent, method="tools/call", name=forged, server="s",
                   original=forged, outcome="error", reason=f"[s] boom{brk}PRIORITY=0")  # fmt: skip
    for fields in (
        dict(call_journal.fields(r)),
        dict(record_fields(call_journal.log_record(r, 0.0))),
    ):
        for name in ("MESSAGE", "MCPD_TOOL", "MCPD_REASON", "MCPD_PROFILE"):
            value = fields[name]
            assert not any(c in value for c in "\n\r\u2028"), (name, value)
        assert fields["MCPD_TOOL"] == visible(forged)
        assert fields["MCPD_REASON"] == visible(f"[s] boom{brk}PRIORITY=0")


def test_a_call_nobody_decided_says_so() -> None:
    r = CallRecord(ts=1.0, agent=AGENTS[0], method="tools/call", name="nope",
                   outcome="refused", reason="unknown tool")  # fmt: skip
    assert call_journal.journal_message(r).endswith(": refused: unknown tool in 0 ms (no decision)")
    fields = dict(call_journal.fields(r))
    assert fields["MCPD_DECISION"] == "none" and "MCPD_DECIDED_BY" not in fields


def test_a_calls_message_names_its_own_agent_and_tool_among_many() -> None:
    """The part of a message that names the agent and the tool is kept for the next
    call of the same; names an agent makes up by the thousand neither grow it without
    bound nor mix one call's words into another's."""
    records = [
        CallRecord(
            ts=1.0,
            agent=AGENTS[n % 2],
            method="tools/call",
            name=f"made_up_{n}",
            outcome="refused",
            reason="unknown tool",
        )
        for n in range(3000)
    ]
    for r in records + records[:5]:
        text = call_journal.journal_message(r)
        assert text.startswith(f"tools/call {r.name} by {r.agent.label()}: refused: unknown")
    assert 0 < len(call_journal._subjects) <= call_journal._SUBJECTS


def test_the_subjects_kept_for_messages_hold_little_whatever_the_names() -> None:
    """Names as long as a record keeps whole, made up by the thousand, are kept for the
    next message only as far as a small budget of characters goes."""
    for n in range(2000):
        name = f"{n}-" + "u" * NAME_KEPT
        r = CallRecord(ts=1.0, agent=AGENTS[0], method="resources/read", name=name,
                       outcome="refused")  # fmt: skip
        assert name in call_journal.journal_message(r)
        assert sum(map(len, call_journal._subjects.values())) <= 1 << 20


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _call(n: int, outcome: AuditOutcome = "ok") -> CallRecord:
    return CallRecord(
        ts=1.0, agent=AGENTS[0], method="tools/call", name=f"mcp__echo__t{n}", outcome=outcome
    )


def test_a_flood_of_calls_is_logged_within_its_budget_and_summed_up() -> None:
    """Past the budget, calls are counted, not logged (journald would drop a service's
    entries past its own, outage warnings among them); the calls that did not succeed
    have a budget of their own, so a flood of successes never hides a refusal; and one
    entry says how many were left out."""
    now = [100.0]
    kept = _Kept()
    logger = call_journal.calls_logger
    saved = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(kept)
    try:
        entries = call_journal.CallJournal(clock=lambda: now[0])
        flood = [_call(n) for n in range(3 * call_journal.BURST)]
        entries.write(flood, 1.0, len(flood))
        entries.write([_call(n, "refused") for n in range(3)], 1.0, 3)
        names = [r.mcpd_tool for r in kept.records]
        assert names[: call_journal.BURST] == [r.name for r in flood[: call_journal.BURST]]
        assert names[call_journal.BURST :] == ["mcp__echo__t0", "mcp__echo__t1", "mcp__echo__t2"]
        assert [r.mcpd_outcome for r in kept.records[call_journal.BURST :]] == ["refused"] * 3
        kept.records.clear()
        now[0] += call_journal.SUMMARY_EVERY  # the budget refills, and it is time to say
        entries.write([_call(7)], 1.0, 1)
        assert [r.getMessage()[:20] for r in kept.records] == [
            "tools/call mcp__echo",
            f"{2 * call_journal.BURST} calls not logge",
        ]
        summary = kept.records[1]
        assert f"({2 * call_journal.BURST} succeeded, 0 did not)" in summary.getMessage()
        assert summary.mcpd_suppressed == 2 * call_journal.BURST
        assert summary.mcpd_event == "call" and summary.levelno == logging.INFO
        kept.records.clear()
        entries.write(
            [_call(n, "error") for n in range(call_journal.BURST + 4)], 1.0, call_journal.BURST + 4
        )
        entries.summarize()  # the daemon stops: what is left out is said at once
        assert len(kept.records) == call_journal.BURST + 1
        assert "(0 succeeded, 4 did not)" in kept.records[-1].getMessage()
        assert kept.records[-1].levelno == NOTICE
        kept.records.clear()
        entries.summarize()
        assert kept.records == []  # nothing left out since: nothing said
    finally:
        logger.removeHandler(kept)
        logger.setLevel(saved)


def test_records_held_for_the_writer_set_off_no_collection() -> None:
    """A burst of calls holds its records until they are written: were they tracked by
    the cycle collector, holding them would set off collections on the call path."""
    records = _records()
    assert not any(gc.is_tracked(r) or gc.is_tracked(r.agent) for r in records)


@pytest.mark.parametrize(
    ("filed", "told"),
    [
        ([None, None], "the audit log is off: they are in no record"),
        ([0, 0], "the audit log could not write them: they are in no record"),
        (
            [call_journal.BURST + 10, 0],
            "the audit log could not write 100 of them, which are in no record; "
            "the others are in it (mcpd calls)",
        ),
        (
            [None, 0],
            "the audit log was off for 10 and could not write 100 of them, which are in no record",
        ),
    ],
)
def test_the_summary_says_the_calls_the_file_did_not_take_are_in_no_record(
    filed: list[int | None], told: str
) -> None:
    """The count of calls left out says they are in the audit log only when they are:
    not with the file off, nor those of a batch it could not take (a full disk)."""
    kept = _Kept()
    logger = call_journal.calls_logger
    saved = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(kept)
    try:
        entries = call_journal.CallJournal(clock=lambda: 100.0)
        entries.write([_call(n) for n in range(call_journal.BURST + 10)], 1.0, filed[0])
        entries.write([_call(n) for n in range(100)], 1.0, filed[1])
        entries.summarize()
        message = kept.records[-1].getMessage()
        assert message.startswith("110 calls not logged one by one"), message
        assert message.endswith(told), message
        assert kept.records[-1].levelno == (logging.INFO if filed[1] is None else NOTICE)
    finally:
        logger.removeHandler(kept)
        logger.setLevel(saved)
