"""The journald handler (checked with a decoder of the native protocol), the readable
stderr lines, mode selection and the per-server stderr rate limit."""

from __future__ import annotations

import array
import fcntl
import io
import logging
import os
import re
import socket
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.local.service import journal, journalfields, logsetup
from protocol.shown.logfields import log_extra
from protocol.shown.visible import visible
from tests.support.system.journald import decode_entry

# --- a small, independent decoder of journald's native protocol --------------------------


def receive_entry(sock: socket.socket) -> tuple[dict[str, str], bytes, bool]:
    """One entry from the test socket: (fields, raw bytes, came through a memfd)."""
    fd_size = array.array("i").itemsize
    data, ancillary, _flags, _addr = sock.recvmsg(1 << 20, socket.CMSG_SPACE(fd_size))
    if not ancillary:
        return decode_entry(data), data, False
    assert data == b"", "a memfd datagram must have an empty payload"
    level, kind, payload = ancillary[0]
    assert (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS)
    fd = array.array("i", payload[:fd_size])[0]
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        wanted = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        assert seals & wanted == wanted, "journald refuses an unsealed memfd"
        raw = os.pread(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)
    return decode_entry(raw), raw, True


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture
def journal_socket() -> Iterator[tuple[str, socket.socket]]:
    with tempfile.TemporaryDirectory(prefix="mcpd-j-") as d:
        path = os.path.join(d, "socket")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(5)
        yield path, sock
        sock.close()


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    log = logging.getLogger("mcpd.test-journal")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    yield log
    for h in list(log.handlers):
        log.removeHandler(h)
        h.close()


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    yield root
    for h in list(root.handlers):
        if h not in saved[0]:
            root.removeHandler(h)
            h.close()
    root.setLevel(saved[1])


# --- journald native protocol -------------------------------------------------------------


def test_record_becomes_an_entry_with_mcpd_fields(
    journal_socket: tuple[str, socket.socket], logger: logging.Logger
) -> None:
    path, rx = journal_socket
    logger.addHandler(journal.JournalHandler(path))
    stderr = ["Traceback (most recent call last):", "  boom", "RuntimeError: no db"]
    logger.warning(
        "server %s is down",
        "tickets",
        extra=log_extra("tickets", "outage", "exited with status 1", stderr),
    )
    fields, raw, via_memfd = receive_entry(rx)
    assert not via_memfd
    assert fields["MESSAGE"] == "tickets: server tickets is down"
    assert fields["PRIORITY"] == "4"
    assert fields["SYSLOG_IDENTIFIER"] == "mcpd"
    assert fields["LOGGER"] == "mcpd.test-journal"
    assert fields["MCPD_SERVER"] == "tickets"
    assert fields["MCPD_EVENT"] == "outage"
    assert fields["MCPD_REASON"] == "exited with status 1"
    assert fields["MCPD_STDERR"] == "\n".join(stderr)
    assert fields["CODE_FILE"] == __file__
    assert fields["CODE_FUNC"] == "test_record_becomes_an_entry_with_mcpd_fields"
    assert int(fields["CODE_LINE"]) > 0
    # The multi-line value really used the binary form, the single-line ones the text form.
    value = "\n".join(stderr).encode()
    assert b"MCPD_STDERR\n" + struct.pack("<Q", len(value)) + value + b"\n" in raw
    assert b"MCPD_SERVER=tickets\n" in raw


def test_the_server_is_named_once_also_when_the_message_names_it(
    journal_socket: tuple[str, socket.socket], logger: logging.Logger
) -> None:
    path, rx = journal_socket
    logger.addHandler(journal.JournalHandler(path))
    out = io.StringIO()
    logger.addHandler(journal.LineHandler(out))
    logger.warning("stubborn: still running 3 s after SIGTERM", extra=log_extra("stubborn"))
    assert receive_entry(rx)[0]["MESSAGE"] == "stubborn: still running 3 s after SIGTERM"
    reason = "missing: cannot start 'nope': No such file or directory"
    logger.error(
        "still cannot start after 5 attempts within 60 s: %s; retrying every 60 s",
        reason,
        extra=log_extra("missing", "spawn_failed", reason),
    )
    assert receive_entry(rx)[0]["MESSAGE"] == (
        "missing: still cannot start after 5 attempts within 60 s: cannot start 'nope': "
        "No such file or directory; retrying every 60 s"
    )
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("WARNING  [stubborn] still running 3 s after SIGTERM"), lines
    assert lines[1].endswith(
        "[missing] spawn_failed: still cannot start after 5 attempts within 60 s: "
        "cannot start 'nope': No such file or directory; retrying every 60 s"
    ), lines


@pytest.mark.parametrize(
    ("level", "priority"),
    [
        (logging.DEBUG, "7"),
        (logging.INFO, "6"),
        (logging.WARNING, "4"),
        (logging.ERROR, "3"),
        (logging.CRITICAL, "2"),
    ],
)
def test_priority_follows_the_level(
    journal_socket: tuple[str, socket.socket], logger: logging.Logger, level: int, priority: str
) -> None:
    path, rx = journal_socket
    logger.addHandler(journal.JournalHandler(path))
    logger.log(level, "x")
    fields, _, _ = receive_entry(rx)
    assert fields["PRIORITY"] == priority
    assert "MCPD_SERVER" not in fields and "MCPD_EVENT" not in fields


def test_traceback_is_part_of_the_message(
    journal_socket: tuple[str, socket.socket], logger: logging.Logger
) -> None:
    path, rx = journal_socket
    logger.addHandler(journal.JournalHandler(path))
    try:
        raise ValueError("bad value")
    except ValueError:
        logger.exception("reload failed", extra=log_extra("notes", "reload"))
    fields, _, _ = receive_entry(rx)
    assert fields["MESSAGE"].startswith("notes: reload failed\nTraceback (most recent call last):")
    assert fields["MESSAGE"].endswith("ValueError: bad value")
    assert fields["PRIORITY"] == "3"


def test_entry_too_big_for_a_datagram_goes_through_a_sealed_memfd(
    journal_socket: tuple[str, socket.socket], logger: logging.Logger
) -> None:
    path, rx = journal_socket
    handler = journal.JournalHandler(path)
    # The limit is the send buffer, which the kernel caps differently per machine.
    handler._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    logger.addHandler(handler)
    big = "\n".join(f"line {i} " + "x" * 100 for i in range(5000))  # ~550 kB
    logger.error("crash", extra=log_extra("big", "crash_loop", stderr=big.split("\n")))
    fields, _, via_memfd = receive_entry(rx)
    assert via_memfd
    assert fields["MCPD_STDERR"] == big
    assert fields["MESSAGE"] == "big: crash"


def test_oversized_fields_are_truncated_with_a_marker(
    journal_socket: tuple[str, socket.socket],
    logger: logging.Logger,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(journalfields, "MAX_FIELD_BYTES", 1000)
    path, rx = journal_socket
    logger.addHandler(journal.JournalHandler(path))
    logger.info("y" * 5000)
    fields, _, _ = receive_entry(rx)
    assert fields["MESSAGE"] == "y" * 1000 + "\n[... 4000 bytes truncated by mcpd]"


def test_unusable_socket_falls_back_to_prefixed_stderr_lines(logger: logging.Logger) -> None:
    out = io.StringIO()
    fallback = journal.LineHandler(out, syslog_prefix=True)
    logger.addHandler(journal.JournalHandler("/nonexistent/socket", fallback=fallback))
    logger.error("first", extra=log_extra("a", "outage", "gone"))
    logger.info("second")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("<4>journal socket /nonexistent/socket unusable")
    assert lines[1:] == ["<3>[a] outage: first (gone)", "<6>second"]


def test_records_are_dropped_and_counted_when_journald_does_not_keep_up(
    journal_socket: tuple[str, socket.socket], logger: logging.Logger
) -> None:
    # Nobody reads: journald stuck, or slower than a flood. Each record the socket has
    # no room for is dropped at once: a wait for room (were it only a fraction of a
    # second each) would have these take longer than the test may.
    path, rx = journal_socket
    handler = journal.JournalHandler(path)
    handler._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    logger.addHandler(handler)
    # Far more than a socket's send buffer (and the kernel's datagram queue) can hold.
    sent = 400
    for i in range(sent):
        logger.info("%d %s", i, "z" * 32_000)
    dropped = handler.dropped
    assert dropped > 0
    received = 0
    rx.settimeout(0.2)
    while True:
        try:
            rx.recv(1 << 20)
        except TimeoutError:
            break
        received += 1
    assert received + dropped == sent
    rx.settimeout(5)
    logger.info("after")
    fields, _, _ = receive_entry(rx)
    assert fields["MCPD_DROPPED"] == str(dropped)
    assert fields["MCPD_EVENT"] == "dropped" and fields["PRIORITY"] == "4"
    assert fields["MESSAGE"] == (
        f"{dropped} log entries dropped: journald was not keeping up (0 warnings or worse)"
    )
    fields, _, _ = receive_entry(rx)
    assert fields["MESSAGE"] == "after" and "MCPD_DROPPED" not in fields
    assert handler.dropped == 0


def test_warnings_journald_had_no_room_for_are_sent_first_once_it_has(
    journal_socket: tuple[str, socket.socket], logger: logging.Logger
) -> None:
    """A server's outage among a flood of lines: the warning is held and sent once
    journald reads again, then mcpd's own warning counts what was dropped, of which
    the calls' entries the audit file keeps; what a server wrote comes after."""
    path, rx = journal_socket
    handler = journal.JournalHandler(path)
    handler._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    logger.addHandler(handler)
    sent = 0
    while not handler.dropped:  # until the socket has no room
        logger.info("%d %s", sent, "z" * 32_000)
        sent += 1
    logger.warning("tickets: unavailable", extra=log_extra("tickets", "outage", "exited"))
    logger.info("%s", "z" * 32_000)
    handler.acquire()
    try:
        assert handler.send_entry(journalfields.encode_entry([("MESSAGE", "a call")]))
    finally:
        handler.release()
    floods = handler.dropped
    rx.settimeout(0.2)
    while True:
        try:
            rx.recv(1 << 20)
        except TimeoutError:
            break
    rx.settimeout(5)
    logger.info("[tickets] stderr: a line of the server's")
    outage, _, _ = receive_entry(rx)
    assert outage["MCPD_EVENT"] == "outage" and outage["PRIORITY"] == "4", outage
    said, _, _ = receive_entry(rx)
    assert said["MCPD_EVENT"] == "dropped" and said["PRIORITY"] == "4", said
    assert said["MCPD_DROPPED"] == str(floods) and "MCPD_SERVER" not in said
    assert said["MESSAGE"] == (
        f"{floods} log entries dropped: journald was not keeping up (0 warnings or "
        "worse; 1 call records, which the audit file keeps)"
    )
    line, _, _ = receive_entry(rx)
    assert line["MESSAGE"] == "[tickets] stderr: a line of the server's", line


# --- readable lines -------------------------------------------------------------------------


def test_plain_stderr_line_format(logger: logging.Logger) -> None:
    out = io.StringIO()
    logger.addHandler(journal.LineHandler(out))
    logger.warning(
        "server down",
        extra=log_extra("tickets", "outage", "exited with status 1", ["oops", "fatal"]),
    )
    logger.info("listening on %s", "/run/mcpd/mcpd.sock")
    lines = out.getvalue().splitlines()
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} "
    assert re.fullmatch(
        stamp + r"WARNING  \[tickets\] outage: server down \(exited with status 1\)", lines[0]
    )
    assert lines[1:3] == ["    stderr| oops", "    stderr| fatal"]
    assert re.fullmatch(stamp + r"INFO     listening on /run/mcpd/mcpd.sock", lines[3])
    assert len(lines) == 4


def test_plain_lines_indent_tracebacks_and_skip_repeated_reason(logger: logging.Logger) -> None:
    out = io.StringIO()
    logger.addHandler(journal.LineHandler(out, syslog_prefix=True))
    try:
        raise KeyError("k")
    except KeyError:
        logger.exception("failed: timeout", extra=log_extra("n", "restart", "timeout"))
    lines = out.getvalue().splitlines()
    assert lines[0] == "<3>[n] restart: failed: timeout"
    assert lines[1] == "<3>    | Traceback (most recent call last):"
    assert all(line.startswith("<3>    | ") for line in lines[1:])


# --- mode selection -------------------------------------------------------------------------


def test_mode_selection(journal_socket: tuple[str, socket.socket], tmp_path: Path) -> None:
    path, _ = journal_socket
    with open(tmp_path / "stream", "w") as stream:
        st = os.fstat(stream.fileno())
        matching = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        other = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino + 1}"}

        def pick(mode: str, env: dict[str, str], sock: str = path) -> logging.Handler:
            h = logsetup.make_handler(mode, stream=stream, environ=env, journal_socket=sock)
            h.close()
            return h

        assert type(pick("auto", matching)) is journal.JournalHandler
        auto_plain = pick("auto", other)
        assert type(auto_plain) is journal.LineHandler and not auto_plain.syslog_prefix
        assert type(pick("auto", {})) is journal.LineHandler
        assert type(pick("journal", {})) is journal.JournalHandler
        stderr = pick("stderr", matching)
        assert type(stderr) is journal.LineHandler and not stderr.syslog_prefix
        # Under journald but without its native socket: lines journald can still rank.
        missing = pick("auto", matching, "/nonexistent/socket")
        assert type(missing) is journal.LineHandler and missing.syslog_prefix
        forced = pick("journal", {}, "/nonexistent/socket")
        assert type(forced) is journal.LineHandler and forced.syslog_prefix
    assert type(logsetup.make_handler("auto", stream=io.StringIO())) is journal.LineHandler
    with pytest.raises(ValueError, match="--log"):
        logsetup.make_handler("syslog")


def test_setup_logging_installs_one_handler(root_logger: logging.Logger) -> None:
    out = io.StringIO()
    first = logsetup.setup_logging("stderr", "debug", stream=out)
    second = logsetup.setup_logging("stderr", "WARNING", stream=out)
    ours = [h for h in root_logger.handlers if isinstance(h, journal.LineHandler)]
    assert ours == [second] and first not in root_logger.handlers
    assert root_logger.level == logging.WARNING
    logging.getLogger("mcpd.x").info("hidden")
    logging.getLogger("mcpd.x").warning("shown")
    assert "hidden" not in out.getvalue() and "shown" in out.getvalue()
    with pytest.raises(ValueError, match="log level"):
        logsetup.setup_logging("stderr", "loud")


# --- rate limiting of server stderr -------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_stderr_lines_are_rate_limited_per_server(logger: logging.Logger) -> None:
    clock = FakeClock()
    out = io.StringIO()
    handler = journal.LineHandler(
        out, syslog_prefix=True, limiter=journal.StderrRateLimiter(50, 10.0, clock)
    )
    logger.addHandler(handler)

    for i in range(80):
        logger.info("noisy %d", i, extra=log_extra("noisy", "stderr"))
    logger.info("quiet 0", extra=log_extra("quiet", "stderr"))
    for i in range(5):
        logger.error("outage %d", i, extra=log_extra("noisy", "outage"))  # never limited
    lines = out.getvalue().splitlines()
    assert [ln for ln in lines if "stderr: noisy" in ln] == [
        f"<6>[noisy] stderr: noisy {i}" for i in range(50)
    ]
    assert "<6>[quiet] stderr: quiet 0" in lines
    assert sum("outage:" in ln for ln in lines) == 5
    assert not any("suppressed" in ln for ln in lines)

    clock.now += 0.5  # five tokens back
    out.seek(0)
    out.truncate()
    for i in range(80, 90):
        logger.info("noisy %d", i, extra=log_extra("noisy", "stderr"))
    assert out.getvalue().splitlines() == [
        "<4>[noisy] stderr: 30 lines of output from noisy suppressed",
        *(f"<6>[noisy] stderr: noisy {i}" for i in range(80, 85)),
    ]

    out.seek(0)
    out.truncate()
    logger.removeHandler(handler)
    handler.close()  # the five lines suppressed since are not forgotten
    assert out.getvalue() == "<4>[noisy] stderr: 5 lines of output from noisy suppressed\n"


def test_held_back_log_messages_are_summed_up_as_log_messages(logger: logging.Logger) -> None:
    clock = FakeClock()
    out = io.StringIO()
    handler = journal.LineHandler(
        out, syslog_prefix=True, limiter=journal.StderrRateLimiter(2, 10.0, clock)
    )
    logger.addHandler(handler)
    for i in range(5):
        logger.info("said %d\nmore", i, extra=log_extra("web", "message"))
    clock.now += 0.5
    logger.info("said again", extra=log_extra("web", "message"))
    logger.removeHandler(handler)
    handler.close()
    lines = out.getvalue().splitlines()
    assert lines[4:6] == [  # two lines each of the two admitted, then three held back
        "<4>[web] message: 3 log messages from web suppressed",
        "<6>[web] message: said again",
    ]
    assert not any("lines of output" in ln for ln in lines)


def test_a_long_flood_gets_a_summary_every_ten_seconds_counting_lines(
    logger: logging.Logger,
) -> None:
    clock = FakeClock()
    out = io.StringIO()
    handler = journal.LineHandler(
        out, syslog_prefix=True, limiter=journal.StderrRateLimiter(50, 10.0, clock)
    )
    logger.addHandler(handler)
    for i in range(3000):  # 30 s of a server writing 100 bursts of 2 lines a second
        logger.info("line %d\nmore %d", i, i, extra=log_extra("noisy", "stderr"))
        clock.now += 0.01
    logger.removeHandler(handler)
    handler.close()
    lines = out.getvalue().splitlines()
    summaries = [ln for ln in lines if "suppressed" in ln]
    assert 3 <= len(summaries) <= 5, summaries
    admitted = sum(1 for ln in lines if "stderr: line " in ln)
    counts = [re.search(r"(\d+) lines of output", ln) for ln in summaries]
    counted = sum(int(m.group(1)) for m in counts if m is not None)
    assert counted == 2 * (3000 - admitted), "lines held back, counted as records"


def test_suppression_summary_is_a_journal_entry(
    journal_socket: tuple[str, socket.socket], logger: logging.Logger
) -> None:
    path, rx = journal_socket
    clock = FakeClock()
    logger.addHandler(
        journal.JournalHandler(path, limiter=journal.StderrRateLimiter(1, 1.0, clock))
    )
    logger.info("a", extra=log_extra("s", "stderr"))
    logger.info("b", extra=log_extra("s", "stderr"))
    logger.info("c", extra=log_extra("s", "stderr"))
    clock.now += 1
    logger.info("d", extra=log_extra("s", "stderr"))
    messages = [receive_entry(rx)[0] for _ in range(3)]
    assert [m["MESSAGE"] for m in messages] == [
        "s: a",
        "s: 2 lines of output from s suppressed",
        "s: d",
    ]
    assert messages[1]["MCPD_SUPPRESSED"] == "2"
    assert messages[1]["MCPD_EVENT"] == "stderr" and messages[1]["MCPD_SERVER"] == "s"


def test_a_config_error_at_start_is_an_error_entry(
    journal_socket: tuple[str, socket.socket],
    root_logger: logging.Logger,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Why the service failed is what `journalctl -p err -u mcpd` must show."""
    from mcpd.cli.main import main

    path, sock = journal_socket
    original = logsetup.setup_logging
    monkeypatch.setattr(
        logsetup,
        "setup_logging",
        lambda mode, level, **kw: original("journal", level, journal_socket=path),
    )
    bad = tmp_path / "config.toml"
    bad.write_text("[servers.x]\ncommand = 5\n")
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--config", str(bad)])
    assert exited.value.code == 78
    entry, _, _ = receive_entry(sock)
    assert entry["PRIORITY"] == "3"
    assert f"config error: {bad}: servers.x.command" in entry["MESSAGE"]


def test_a_servers_log_messages_share_its_stderr_budget(logger: logging.Logger) -> None:
    clock = FakeClock()
    out = io.StringIO()
    handler = journal.LineHandler(
        out, syslog_prefix=True, limiter=journal.StderrRateLimiter(50, 10.0, clock)
    )
    logger.addHandler(handler)
    for i in range(40):
        logger.info("said %d", i, extra=log_extra("noisy", "message"))
        logger.info("wrote %d", i, extra=log_extra("noisy", "stderr"))
    logger.removeHandler(handler)
    handler.close()
    lines = out.getvalue().splitlines()
    assert sum(" said " in ln or " wrote " in ln for ln in lines) == 50
    assert lines[-2:] == [
        "<4>[noisy] stderr: 15 lines of output from noisy suppressed",
        "<4>[noisy] message: 15 log messages from noisy suppressed",
    ]


def test_a_count_of_what_was_held_back_before_the_handler_is_never_held_back(
    logger: logging.Logger,
) -> None:
    # A server's log messages are held to its budget before a record is made of them,
    # and the count of those goes in a record of its own: that one always passes.
    clock = FakeClock()
    out = io.StringIO()
    handler = journal.LineHandler(
        out, syslog_prefix=True, limiter=journal.StderrRateLimiter(50, 10.0, clock)
    )
    logger.addHandler(handler)
    for i in range(60):
        logger.info("wrote %d", i, extra=log_extra("noisy", "stderr"))
    logger.warning(
        "%d log messages from %s held back (too many at once)",
        700,
        "noisy",
        extra={**log_extra("noisy", "message"), "mcpd_suppressed": 700},
    )
    logger.removeHandler(handler)
    handler.close()
    lines = out.getvalue().splitlines()
    assert "<4>[noisy] message: 700 log messages from noisy held back (too many at once)" in lines
    assert lines[-1] == "<4>[noisy] stderr: 10 lines of output from noisy suppressed"


@pytest.mark.parametrize("brk", ["\n", "\r", "\u2028"])
def test_a_servers_names_and_reasons_are_one_line_fields_its_stderr_keeps_its_lines(
    journal_socket: tuple[str, socket.socket], logger: logging.Logger, brk: str
) -> None:
    """A server's tool name (``MCPD_ITEM``) or error text (``MCPD_REASON``) with a line
    break would print, under ``journalctl --output-fields=`` or ``-o verbose``, lines
    that read as other fields; its stderr tail is lines, and stays so."""
    path, rx = journal_socket
    logger.addHandler(journal.JournalHandler(path))
    name, reason = f"bad{brk}PRIORITY=0", f"boom{brk}MESSAGE_ID=x"
    logger.warning(
        "a finding",
        extra=log_extra("evil", "finding", reason, ["one", "two"], item=name, kind="tool"),
    )
    fields, _, _ = receive_entry(rx)
    for field in ("MCPD_ITEM", "MCPD_REASON", "MCPD_SERVER", "MCPD_EVENT", "MCPD_KIND"):
        assert not any(c in fields[field] for c in "\n\r\u2028"), (field, fields[field])
    assert fields["MCPD_ITEM"] == visible(name) and fields["MCPD_REASON"] == visible(reason)
    assert fields["MCPD_STDERR"] == "one\ntwo"
