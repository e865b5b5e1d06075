"""What a server writes reaches mcpd's log as text, never as terminal commands: its
stderr, its log messages and the errors it answers with are shown with their escapes
and hidden characters made visible, in the plain lines (``mcpd serve`` in a terminal)
and in the journal's fields; mcpd's own line structure stays as it was."""

from __future__ import annotations

import io
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from mcpd.local.service import journal
from protocol.shown.logfields import log_extra
from tests.support.clients.agent import make_config, running

ROOT = Path(__file__).resolve().parents[4]
SERVER = str(ROOT / "tests" / "support" / "hostile" / "text_server.py")

RAW = ("\x1b", "\r", "\x07", "\u202e", "\u2069", "\u200b", "\U000e0041")
SHOWN = ("\\x1b[2K\\r", "\\x1b]8;;https://evil.example\\x07", "\\u202e", "\\u200b", "\\U000e0041")


def problems(text: str) -> list[str]:
    raw = [f"{ch!r} raw" for ch in RAW if ch in text]
    return raw + [f"no {escape}" for escape in SHOWN if escape not in text]


class Collector(logging.Handler):
    """Keeps the daemon's records; ``complete`` once each wanted kind has been seen."""

    def __init__(self, wanted: set[tuple[str, str]]) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.missing = set(wanted)
        self.complete = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        reason = getattr(record, "mcpd_reason", None)
        # Raw, or already escaped where a sentence of mcpd's quotes the server.
        said = f"{record.getMessage()} {reason}"
        if "\x1b" in said or "\\x1b" in said:
            kind = "error" if reason else getattr(record, "mcpd_event", "")
            self.missing.discard((getattr(record, "mcpd_server", ""), kind))
        if not self.missing:
            self.complete.set()


@pytest.fixture
def collector() -> Iterator[Collector]:
    root = logging.getLogger()
    level = root.level
    handler = Collector({("evil", "stderr"), ("evil", "message"), ("broken", "error")})
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def test_a_servers_stderr_messages_and_errors_are_logged_visible(
    tmp_path: Path, collector: Collector
) -> None:
    servers = {
        "evil": {"command": sys.executable, "args": [SERVER]},
        "broken": {"command": sys.executable, "args": [SERVER, "--fail"]},
    }
    cfg = make_config(tmp_path, servers, backoff_base=30, backoff_cap=60)
    with trio.fail_after(60):
        async with running(cfg):
            await collector.complete.wait()
    lines = journal.LineHandler(io.StringIO())
    terminal = "".join(lines.format_record(r) for r in collector.records)
    assert problems(terminal) == [], terminal
    # Each line of the output is one of mcpd's: a record's first line, or one of its
    # continuation lines, indented under it.
    stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [A-Z]+ +|    (stderr)?\| ")
    assert [line for line in terminal.splitlines() if not stamp.match(line)] == []
    entries = [journal.record_fields(r) for r in collector.records]
    fields = "\n".join(value for entry in entries for _, value in entry)
    assert problems(fields) == [], fields
    evil = [dict(e) for e in entries if ("MCPD_SERVER", "evil") in e]
    assert any(e.get("MCPD_EVENT") == "stderr" for e in evil)
    assert any(e.get("MCPD_EVENT") == "message" and "\\u202e" in e["MESSAGE"] for e in evil)


def test_a_reason_or_stderr_tail_cannot_start_a_line_of_its_own() -> None:
    out = io.StringIO()
    log = logging.getLogger("mcpd.test-log-visible")
    log.propagate = False
    handler = journal.LineHandler(out)
    log.addHandler(handler)
    try:
        forged = "gone\n2030-01-01 00:00:00.000 INFO     [bank] ready\x1b[8m"
        log.warning(
            "server down",
            extra=log_extra("tickets", "outage", forged, ["last\rWORDS", "tail\x9b2K"]),
        )
    finally:
        log.removeHandler(handler)
        handler.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert lines[0].endswith(
        "[tickets] outage: server down "
        "(gone\\n2030-01-01 00:00:00.000 INFO     [bank] ready\\x1b[8m)"
    )
    assert lines[1:] == ["    stderr| last\\rWORDS", "    stderr| tail\\x9b2K"]
