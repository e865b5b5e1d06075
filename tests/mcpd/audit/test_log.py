"""The audit log's file and journal: one JSON line a record, written off the call path;
rotated at its cap with the records just written kept; appended to after a restart; a
full buffer drops and counts, never waits, and is given up by the agent holding the most
of it; requests refused before any server or rule are counted in one record a batch past
their agent's budget; a link where the file goes is not followed."""

from __future__ import annotations

import io
import json
import logging
import os
import pwd
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from mcpd.audit import log as audit_log
from mcpd.audit import record as records
from mcpd.audit import summed
from mcpd.audit.arguments import MAX_KEPT
from mcpd.audit.log import FILE_NAME, AuditLog
from mcpd.audit.reader import AuditRecords, log_files
from mcpd.audit.record import CallRecord
from mcpd.config.credentials.secrets import HeldSecret
from mcpd.config.tables.model import DaemonConfig
from mcpd.local.service.journal import JournalHandler, LineHandler
from mcpd.local.service.journalfields import record_fields
from mcpd.policy.agent import AgentInfo
from mcpd.policy.redaction.masking import KnownSecrets, marker
from tests.support.system.journald import decode_entry

AGENT = AgentInfo(
    uid=1000, pid=4242, exe="claude", profile="default", connection="c1", era="modern"
)


_opened: list[AuditLog] = []


def open_log(*args: Any, **kw: Any) -> AuditLog:
    """An audit log the test's end closes, so no test leaves its file open."""
    log = AuditLog(*args, **kw)
    _opened.append(log)
    return log


@pytest.fixture(autouse=True)
def _closed_logs() -> Iterator[None]:
    yield
    while _opened:
        _opened.pop()._close()


def settings(**kw: Any) -> DaemonConfig:
    return DaemonConfig(**{"audit_journal": False, **kw})


def record(n: int, **kw: Any) -> CallRecord:
    base: dict[str, Any] = {
        "ts": 1_700_000_000.0 + n,
        "agent": AGENT,
        "method": "tools/call",
        "name": f"mcp__notes__t{n}",
        "original": f"t{n}",
        "server": "notes",
        "outcome": "ok",
        "duration_ms": 1.5,
        "result_bytes": 10,
    }
    return CallRecord(**{**base, **kw})


async def test_a_record_is_one_json_line_with_every_field(tmp_path: Path) -> None:
    log = open_log(str(tmp_path), settings())
    raw = b'{"q": "x"}'
    refused = {"decision": "deny", "decided_by": "policy[0]", "outcome": "refused"}
    log.record(record(1, args_bytes=len(raw), reason="no deletions", **refused), raw)
    await log.flush()
    [line] = (tmp_path / FILE_NAME).read_text().splitlines()
    data = json.loads(line)
    assert data["time"] == "2023-11-14T22:13:21.000Z"
    assert data["agent"] == {
        "uid": 1000,
        "pid": 4242,
        "exe": "claude",
        "profile": "default",
        "connection": "c1",
        "era": "modern",
    }
    assert (data["args_bytes"], data["args_digest"]) == (10, records.digest(raw))
    assert "arguments" not in data  # only with audit_arguments
    assert (data["decision"], data["decided_by"], data["outcome"], data["reason"]) == (
        "deny",
        "policy[0]",
        "refused",
        "no deletions",
    )
    assert os.stat(tmp_path / FILE_NAME).st_mode & 0o777 == 0o600


async def test_arguments_are_kept_only_when_asked_with_secrets_masked(tmp_path: Path) -> None:
    secrets = KnownSecrets()
    secrets.replace("config", [HeldSecret("servers.gh.headers.Authorization", "ghp-secret-1")])
    log = open_log(str(tmp_path), settings(audit_arguments=True), secrets)
    raw = b'{"note": "token ghp-secret-1 inside", "n": 1}'
    log.record(record(1, args_bytes=len(raw)), raw)
    await log.flush()
    text = (tmp_path / FILE_NAME).read_text()
    assert "ghp-secret-1" not in text
    kept = json.loads(text)["arguments"]
    assert kept == {"note": f"token {marker('servers.gh.headers.Authorization')} inside", "n": 1}


async def test_arguments_that_give_a_key_twice_are_kept_as_the_text_the_server_got(
    tmp_path: Path,
) -> None:
    """A server may read either value of a key given twice: the record keeps both, as
    they were sent, not the one a decoder would have kept."""
    log = open_log(str(tmp_path), settings(audit_arguments=True))
    raw = b'{"path": "/etc/passwd", "mode": "delete", "mode": "read"}'
    log.record(record(1, args_bytes=len(raw)), raw)
    await log.flush()
    [written] = AuditRecords(str(tmp_path))
    assert written.arguments == '{"path":"/etc/passwd","mode":"delete","mode":"read"}'
    assert written.args_digest == records.digest(raw)


async def test_arguments_too_large_to_digest_are_never_copied_and_none_stay_in_memory(
    tmp_path: Path,
) -> None:
    """Arguments past what a record keeps are not copied for the writer (their digest is
    worked out at once), and once written, the latest records kept in memory (for the
    status page) hold no arguments at all: a flood of large ones holds nothing."""
    log = open_log(str(tmp_path), settings(audit_arguments=True))
    big = b'{"x": "' + b"a" * (4 * MAX_KEPT) + b'"}'
    small = b'{"a": 1}'
    made = record(1, args_bytes=len(big))
    log.record(made, big)
    log.record(record(2, args_bytes=len(small)), small)
    assert made.args_digest == records.digest(big)
    assert [len(arguments) for _, arguments in log._to_digest] == [len(small)]
    await log.flush()
    first, second = AuditRecords(str(tmp_path))
    assert first.arguments == f"({len(big)} bytes, more than the 65536 kept)"
    assert second.arguments == {"a": 1}
    held = log.recent(lambda r: True, 10)
    assert len(held) == 2 and all(r.arguments is msgspec.UNSET for r in held)


async def test_the_file_rotates_at_its_cap_and_keeps_what_was_just_written(
    tmp_path: Path,
) -> None:
    log = open_log(str(tmp_path), settings(audit_max_bytes=4096, audit_files=3))
    line = len(msgspec.json.encode(record(0, time="2023-11-14T22:13:20.000Z"))) + 1
    per_file = 4096 // line
    total = per_file * 3 + 5  # three full files and part of a fourth
    for n in range(total):
        log.record(record(n))
        if n % 7 == 0:  # batches of every size, some across a rotation
            await log.flush()
    await log.flush()
    names = sorted(os.listdir(tmp_path))
    assert names == [FILE_NAME, f"{FILE_NAME}.1", f"{FILE_NAME}.2", f"{FILE_NAME}.3"]
    for name in names:
        assert os.path.getsize(tmp_path / name) <= 4096
    read = [r.name for r in AuditRecords(str(tmp_path))]
    assert read == [f"mcp__notes__t{n}" for n in range(total)]
    # One more file's worth: the oldest file goes, and only it.
    for n in range(total, total + per_file):
        log.record(record(n))
    await log.flush()
    read = [r.name for r in AuditRecords(str(tmp_path))]
    assert read == [f"mcp__notes__t{n}" for n in range(per_file, total + per_file)]
    assert log_files(str(tmp_path))[-1].endswith(FILE_NAME)


async def test_a_restart_adds_to_what_is_there(tmp_path: Path) -> None:
    first = open_log(str(tmp_path), settings())
    for n in range(3):
        first.record(record(n))
    await first.flush()
    first._close()
    # The daemon died in the middle of a line.
    with open(tmp_path / FILE_NAME, "ab") as f:
        f.write(b'{"time": "2023-11-14T22:13:2')
    second = open_log(str(tmp_path), settings())
    for n in range(3, 5):
        second.record(record(n))
    await second.flush()
    reading = AuditRecords(str(tmp_path))
    assert [r.name for r in reading] == [f"mcp__notes__t{n}" for n in range(5)]
    assert reading.unreadable == 1


async def test_a_full_buffer_drops_and_counts_and_never_waits(tmp_path: Path) -> None:
    log = open_log(str(tmp_path), settings(), capacity=10)
    for n in range(15):
        log.record(record(n))  # no writer ran in between: the buffer filled
    assert log.counts.dropped == 5
    assert sum(log.counts.calls.values()) == 15  # the metrics count every call
    await log.flush()
    reading = AuditRecords(str(tmp_path))
    assert [r.name for r in reading] == [f"mcp__notes__t{n}" for n in range(10)]
    assert reading.dropped == 5


async def test_a_link_where_the_file_goes_is_not_followed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / FILE_NAME).symlink_to(target)
    log = open_log(str(state), settings())
    log.record(record(1))
    with caplog.at_level(logging.WARNING):
        await log.flush()
    assert target.read_text() == ""
    assert log.counts.write_errors == 1
    assert "cannot write the audit log" in caplog.text


async def test_a_fifo_where_the_file_goes_gets_nothing_and_is_a_write_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.mkfifo(state / FILE_NAME, 0o600)
    log = open_log(str(state), settings())
    for n in range(2):
        log.record(record(n))
        with caplog.at_level(logging.WARNING):
            await log.flush()
    assert log.counts.write_errors == 2 and log.written == 0
    said = [
        r.getMessage() for r in caplog.records if "cannot write the audit log" in r.getMessage()
    ]
    assert said == [
        f"cannot write the audit log {state / FILE_NAME}: {state / FILE_NAME} is not a regular "
        f"file (a FIFO of uid {os.geteuid()}, {pwd.getpwuid(os.geteuid()).pw_name}); mcpd "
        "writes no record to it until it is removed (mcpd then makes its own)"
    ]


async def test_a_log_of_mcpds_that_others_may_read_is_made_private_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / FILE_NAME).write_bytes(b"")
    (state / FILE_NAME).chmod(0o644)
    log = open_log(str(state), settings())
    log.record(record(1))
    with caplog.at_level(logging.WARNING):
        await log.flush()
    assert os.stat(state / FILE_NAME).st_mode & 0o777 == 0o600
    assert f"the audit log {state / FILE_NAME} could be read by other users (mode 0644)" in (
        caplog.text
    )
    assert [r.name for r in AuditRecords(str(state))] == ["mcp__notes__t1"]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user")
async def test_rotation_moves_files_planted_under_older_names_and_writes_none_of_them(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    theirs = state / f"{FILE_NAME}.1"
    theirs.write_bytes(b"planted\n")
    os.chown(theirs, 54_321, 54_321)
    os.mkfifo(state / f"{FILE_NAME}.2")
    planted = os.open(theirs, os.O_RDONLY)  # the file itself, wherever it is moved
    try:
        log = open_log(str(state), settings(audit_max_bytes=1024, audit_files=3))
        for n in range(40):
            log.record(record(n))
            await log.flush()
        assert os.pread(planted, 100, 0) == b"planted\n"
    finally:
        os.close(planted)
    for name in os.listdir(state):
        st = os.lstat(state / name)
        assert st.st_uid == 54_321 or (stat.S_ISREG(st.st_mode) and st.st_uid == 0), name
    assert log.counts.write_errors == 0
    assert [r.name for r in AuditRecords(str(state))][-1] == "mcp__notes__t39"


async def test_each_call_is_a_journal_entry_below_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(None, settings(audit_journal=True))
    log.record(record(1))
    log.record(record(2, outcome="refused", decision="deny", decided_by="policy[0]", reason="no"))
    with caplog.at_level(logging.INFO, logger="mcpd.calls"):
        await log.flush()
    ok, refused = [dict(record_fields(r)) for r in caplog.records if r.name == "mcpd.calls"]
    assert (ok["PRIORITY"], ok["MCPD_EVENT"], ok["MCPD_OUTCOME"]) == ("6", "call", "ok")
    assert (ok["MCPD_SERVER"], ok["MCPD_TOOL"], ok["MCPD_AGENT_PID"]) == (
        "notes",
        "mcp__notes__t1",
        "4242",
    )
    assert refused["PRIORITY"] == "5"  # notice: journalctl -p warning leaves it out
    assert (refused["MCPD_DECISION"], refused["MCPD_DECIDED_BY"]) == ("deny", "policy[0]")
    assert "refused: no" in refused["MESSAGE"]


async def test_the_journal_can_be_turned_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(str(tmp_path), settings(audit_journal=False))
    log.record(record(1))
    with caplog.at_level(logging.DEBUG, logger="mcpd.calls"):
        await log.flush()
    assert not [r for r in caplog.records if r.name == "mcpd.calls"]
    assert len((tmp_path / FILE_NAME).read_text().splitlines()) == 1


async def test_a_batch_of_calls_is_one_journal_entry_each_through_mcpd_s_handlers(
    tmp_path: Path,
) -> None:
    """Under systemd each call is a journal entry of its own, with fields to filter by;
    on stderr one line each, written together."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "journal"))
    sock.settimeout(5)
    root = logging.getLogger()
    lines = io.StringIO()
    handlers = [JournalHandler(str(tmp_path / "journal")), LineHandler(lines)]
    saved = root.level
    root.setLevel(logging.INFO)
    for handler in handlers:
        root.addHandler(handler)
    try:
        log = open_log(None, settings(audit_journal=True))
        log.record(record(1))
        log.record(record(2, outcome="refused", decision="deny", decided_by="policy[0]"))
        await log.flush()
    finally:
        root.setLevel(saved)
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()
    entries = [decode_entry(sock.recv(1 << 16)) for _ in range(2)]
    sock.close()
    assert [e["MCPD_TOOL"] for e in entries] == ["mcp__notes__t1", "mcp__notes__t2"]
    assert [(e["PRIORITY"], e["MCPD_OUTCOME"]) for e in entries] == [("6", "ok"), ("5", "refused")]
    assert entries[1]["MCPD_DECIDED_BY"] == "policy[0]" and entries[1]["MCPD_EVENT"] == "call"
    assert entries[0]["MESSAGE"].startswith(
        "notes: tools/call mcp__notes__t1 (notes/t1) by pid 4242"
    )
    written = lines.getvalue().splitlines()
    assert len(written) == 2
    assert "INFO     [notes] call: tools/call mcp__notes__t1" in written[0]
    assert "NOTICE   [notes] call: tools/call mcp__notes__t2" in written[1]


async def test_arguments_kept_are_held_for_the_writer_within_a_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With audit_arguments, the arguments wait for the writer to mask them, up to what
    the buffer may hold; past that, a record's are worked out as it is made, and
    nothing more is held for the writer."""
    monkeypatch.setattr(audit_log, "HELD_ARGUMENTS", 100)
    log = open_log(str(tmp_path), settings(audit_arguments=True))
    small, big = b'{"a": 1}', b'{"b": "' + b"x" * 200 + b'"}'
    first, second = record(1, args_bytes=len(small)), record(2, args_bytes=len(big))
    log.record(first, small)
    log.record(second, big)
    assert first.args_digest is None  # left to the writer
    assert second.args_digest == records.digest(big)  # not held: done now
    assert msgspec.json.decode(second.arguments) == {"b": "x" * 200}
    await log.flush()
    written = [json.loads(line) for line in (tmp_path / FILE_NAME).read_text().splitlines()]
    assert [w["args_digest"] for w in written] == [records.digest(small), records.digest(big)]
    assert [w["arguments"] for w in written] == [{"a": 1}, {"b": "x" * 200}]
    log.record(record(3, args_bytes=len(small)), small)  # written: room again
    assert log._to_digest[-1] == (log._buffer[-1], small)


async def test_without_the_arguments_kept_nothing_of_them_waits_for_the_writer(
    tmp_path: Path,
) -> None:
    """Only the digest is recorded: worked out as the record is made, over the bytes
    the call came in, with no copy of them held until the record is written."""
    log = open_log(str(tmp_path), settings())
    raw = msgspec.Raw(b'{"q": "' + b"y" * 5000 + b'"}')
    made = record(1, args_bytes=len(raw))
    log.record(made, raw)
    assert made.args_digest == records.digest(bytes(raw))
    assert log._to_digest == []
    await log.flush()
    (line,) = (tmp_path / FILE_NAME).read_text().splitlines()
    assert json.loads(line)["args_digest"] == records.digest(bytes(raw))
    assert "arguments" not in json.loads(line)


async def test_short_arguments_not_kept_are_digested_by_the_writer(tmp_path: Path) -> None:
    """Without audit_arguments, short arguments wait for the writer as a copy (their
    digest is worked out there, with the batch's), and what is written is their digest
    only, the same as one worked out at once."""
    log = open_log(str(tmp_path), settings())
    short = b'{"q": "' + b"z" * (audit_log.DIGESTED_LATER - 10) + b'"}'
    view = msgspec.Raw(short)
    made = record(1, args_bytes=len(short))
    log.record(made, view)
    assert made.args_digest is None  # left to the writer
    [(waiting, copy)] = log._to_digest
    assert waiting is made and copy == short and type(copy) is bytes
    await log.flush()
    (line,) = (tmp_path / FILE_NAME).read_text().splitlines()
    assert json.loads(line)["args_digest"] == records.digest(short)
    assert "arguments" not in json.loads(line)
    assert log._to_digest == []


async def test_a_burst_is_written_at_once_and_a_trickle_after_a_moment(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The writer waits a moment for records to gather, unless a batch's worth has:
    a burst of calls is written while it is still fresh, a single call soon after."""
    log = open_log(str(tmp_path), settings())
    batches: list[int] = []
    written = trio.Event()

    def batch_written() -> None:
        batches.append(log.written)
        written.set()

    log.watch(batch_written)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        log.record(record(0))
        await trio.testing.wait_all_tasks_blocked()
        assert batches == []  # the clock stands still: still gathering
        for n in range(1, audit_log.BATCH):
            log.record(record(n))
        await written.wait()  # a batch's worth: written without the clock moving
        assert batches == [audit_log.BATCH]
        written = trio.Event()
        log.record(record(audit_log.BATCH))
        await trio.testing.wait_all_tasks_blocked()
        assert batches == [audit_log.BATCH]
        mock_clock.jump(audit_log.GATHER)
        await written.wait()
        assert batches == [audit_log.BATCH, audit_log.BATCH + 1]
        nursery.cancel_scope.cancel()
    lines = (tmp_path / FILE_NAME).read_text().splitlines()
    assert len(lines) == audit_log.BATCH + 1


FLOODER = AgentInfo(uid=1000, pid=66, exe="python3", profile="default", connection="c9")


def unknown(n: int, agent: AgentInfo = FLOODER) -> CallRecord:
    """A call of a name mcpd does not know: refused before any server or rule."""
    return CallRecord(
        ts=1_700_000_000.0 + n / 1000,
        agent=agent,
        method="tools/call",
        name=f"x{n}",
        outcome="refused",
        reason="unknown tool",
        result_bytes=90,
    )


async def test_a_full_buffer_is_given_up_by_the_agent_holding_the_most(tmp_path: Path) -> None:
    """The writer fell behind while one agent floods: that agent's records give up
    their places, and the calls of an agent calling at its pace are all written."""
    log = open_log(str(tmp_path), settings(), capacity=10)
    for n in range(12):
        log.record(record(n, agent=FLOODER))
    for n in range(100, 103):
        log.record(record(n))
    assert log.counts.dropped == 5
    await log.flush()
    reading = AuditRecords(str(tmp_path))
    written = [(r.agent.pid, r.name) for r in reading]
    assert written == [(66, f"mcp__notes__t{n}") for n in range(7)] + [
        (4242, f"mcp__notes__t{n}") for n in range(100, 103)
    ]
    assert reading.dropped == 5


async def test_requests_refused_at_once_past_an_agents_budget_are_counted_in_one_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A flood of calls that reach nothing takes no room from other agents' calls: past
    its agent's budget, each batch writes one record saying how many (from when to
    when, the first's name), so every call is in the file, and the log says so once."""
    log = open_log(str(tmp_path), settings(), capacity=summed.BURST + 50, clock=lambda: 5.0)
    flood = 2000
    for n in range(flood):
        log.unrouted(unknown(n))
        if n % 50 == 0:
            log.record(record(n))
    with caplog.at_level(logging.WARNING, logger="mcpd.audit"):
        await log.flush()
        log.unrouted(unknown(flood))  # the next batch: a summary of its own
        await log.flush()
    reading = AuditRecords(str(tmp_path))
    written = list(reading)
    assert [r.name for r in written if r.agent == AGENT] == [
        f"mcp__notes__t{n}" for n in range(0, flood, 50)
    ]
    one_by_one = [r for r in written if r.agent == FLOODER and r.count is msgspec.UNSET]
    assert [r.name for r in one_by_one] == [f"x{n}" for n in range(summed.BURST)]
    first, second = [r for r in written if r.count is not msgspec.UNSET]
    assert (first.count, first.name, first.outcome, first.reason) == (
        flood - summed.BURST,
        f"x{summed.BURST}",
        "refused",
        "unknown tool",
    )
    assert (first.ts, first.last_ts) == (unknown(summed.BURST).ts, unknown(flood - 1).ts)
    assert first.result_bytes == 90 * (flood - summed.BURST)
    assert (second.count, second.name) == (1, f"x{flood}")
    assert sum(r.calls for r in written) == flood + 1 + flood // 50
    assert reading.dropped == 0 and log.counts.dropped == 0
    assert sum(log.counts.calls.values()) == flood + 1 + flood // 50
    [warning] = [r for r in caplog.records if "refused before reaching a server" in r.message]
    assert "pid 66 (python3)" in warning.message


async def test_a_summary_alone_wakes_the_writer(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Calls counted past their agent's budget wait in no buffer: the first of them
    since the last batch wakes the writer, as a record would."""
    log = open_log(str(tmp_path), settings(), clock=lambda: 5.0)
    batches: list[int] = []
    second = trio.Event()

    def batch_written() -> None:
        batches.append(log.written)
        if len(batches) == 2:
            second.set()

    log.watch(batch_written)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        for n in range(summed.BURST):  # the budget spent, and written
            log.unrouted(unknown(n))
        await log.flush()
        assert batches == [summed.BURST]
        log.unrouted(unknown(summed.BURST))
        mock_clock.jump(audit_log.GATHER)
        await second.wait()
        nursery.cancel_scope.cancel()
    *_, last = AuditRecords(str(tmp_path))
    assert (last.count, last.name) == (1, f"x{summed.BURST}")


@pytest.mark.parametrize(("blocked", "files"), [((2, 3), 6), ((1,), 3), ((1,), 1)])
async def test_a_directory_under_a_rotated_name_costs_no_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, blocked: tuple[int, ...], files: int
) -> None:
    for n in blocked:
        (tmp_path / f"{FILE_NAME}.{n}").mkdir()
    log = open_log(str(tmp_path), settings(audit_max_bytes=1024, audit_files=files))
    line = len(msgspec.json.encode(record(999, time="2023-11-14T22:13:20.000Z"))) + 1
    kept = files - len(blocked) + 1 if files > len(blocked) else 4  # files' worth
    calls = (1024 // line) * kept
    with caplog.at_level(logging.WARNING, logger="mcpd.audit"):
        for n in range(calls):
            log.record(record(n))
            await log.flush()
    assert log.counts.write_errors == 0
    assert [r.name for r in AuditRecords(str(tmp_path))] == [
        f"mcp__notes__t{n}" for n in range(calls)
    ]
    said = [r.getMessage() for r in caplog.records]
    for n in blocked:
        where = tmp_path / f"{FILE_NAME}.{n}"
        assert sum(f"{where} is a directory" in line for line in said) == 1, said
    if files == 1:
        assert sum("past its cap" in line for line in said) == 1, said
