"""journald stopped, its socket and its stream with it: what mcpd logs then is counted,
never raised into the daemon, and said once journald takes entries again; and a
service systemd starts while journald is down logs to journald once it is back."""

from __future__ import annotations

import io
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

from mcpd.audit import journal as call_journal
from mcpd.audit.record import CallRecord
from mcpd.local.service import journal, logsetup
from mcpd.policy.agent import AgentInfo
from protocol.shown.logfields import log_extra
from tests.support.system.journald import decode_entry


@pytest.fixture
def dead_stderr() -> Iterator[TextIO]:
    """A stream whose reader has gone, as systemd's journal stream is once journald
    stops: each write raises BrokenPipeError."""
    read, write = os.pipe()
    os.close(read)
    with open(write, "w") as stream:
        yield stream
        stream.close = lambda: None  # type: ignore[method-assign]  # its buffer can go nowhere


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    log = logging.getLogger("mcpd.test-journal-gone")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    yield log
    for h in list(log.handlers):
        log.removeHandler(h)


def _bind(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5)
    return sock


def _call(name: str) -> CallRecord:
    return CallRecord(
        ts=1_700_000_000.0,
        agent=AgentInfo(uid=1000, pid=42, exe="claude", profile="default"),
        method="tools/call",
        name=name,
        server="tickets",
        original="open",
        decision="allow",
        outcome="ok",
        duration_ms=3.0,
    )


def test_records_and_calls_journald_and_stderr_cannot_take_are_counted_and_said_later(
    tmp_path: Path, dead_stderr: TextIO, logger: logging.Logger
) -> None:
    path = tmp_path / "socket"
    rx = _bind(path)
    fallback = journal.LineHandler(dead_stderr, syslog_prefix=True)
    handler = journal.JournalHandler(str(path), fallback=fallback)
    logger.addHandler(handler)
    logger.info("before")
    assert decode_entry(rx.recv(1 << 16))["MESSAGE"] == "before"
    rx.close()
    path.unlink()  # journald stopped, its sockets with it

    logger.warning("tickets: unavailable", extra=log_extra("tickets", "outage", "exited"))
    logger.info("a line")
    call_journal.hand_over(handler, [_call("mcp__tickets__open")], 1_700_000_000.0)
    assert handler.lost == 3

    rx = _bind(path)  # journald back
    logger.info("after")
    said = decode_entry(rx.recv(1 << 16))
    assert said["MCPD_EVENT"] == "dropped" and said["PRIORITY"] == "4"
    assert said["MCPD_DROPPED"] == "3"
    assert said["MESSAGE"] == (
        "3 log entries dropped: neither journald nor stderr could take them (1 warnings "
        "or worse; 1 call records, which the audit file keeps)"
    )
    assert decode_entry(rx.recv(1 << 16))["MESSAGE"] == "after"
    assert handler.lost == 0
    rx.close()


def test_entries_lost_are_said_on_stderr_when_it_takes_lines_before_journald(
    tmp_path: Path, logger: logging.Logger
) -> None:
    out = io.StringIO()
    fallback = journal.LineHandler(out, syslog_prefix=True)
    handler = journal.JournalHandler(str(tmp_path / "gone"), fallback=fallback)
    handler.lost, handler._lost_warnings = 2, 1
    logger.addHandler(handler)
    logger.info("now")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"<4>journal socket {tmp_path / 'gone'} unusable")
    assert lines[1:] == [
        "<4>dropped: 2 log entries dropped: neither journald nor stderr could take them "
        "(1 warnings or worse)",
        "<6>now",
    ]
    assert handler.lost == 0


def test_a_service_started_while_journald_was_down_logs_to_journald_once_it_is_back(
    tmp_path: Path, logger: logging.Logger
) -> None:
    """systemd gives a service /dev/null for stderr (and no $JOURNAL_STREAM) when it
    cannot connect journald's stream: the native socket is used all the same, so the
    entries made after journald is back reach it."""
    path = tmp_path / "socket"
    service = {"INVOCATION_ID": "0" * 32}
    with open(os.devnull, "w") as null:
        handler = logsetup.make_handler(
            "auto", stream=null, environ=service, journal_socket=str(path)
        )
        assert type(handler) is journal.JournalHandler
        logger.addHandler(handler)
        logger.info("while journald is down")
        rx = _bind(path)
        logger.info("journald is back")
        assert decode_entry(rx.recv(1 << 16))["MESSAGE"] == "journald is back"
        rx.close()
        # Not a service, or a service whose stderr someone reads: lines, as before.
        for env, stream in (({}, null), (service, io.StringIO())):
            plain = logsetup.make_handler(
                "auto", stream=stream, environ=env, journal_socket=str(path)
            )
            assert type(plain) is journal.LineHandler and not plain.syslog_prefix
    with open(tmp_path / "file", "w") as file:
        plain = logsetup.make_handler(
            "auto", stream=file, environ=service, journal_socket=str(path)
        )
        assert type(plain) is journal.LineHandler
