"""``mcpd status`` for people, and the Prometheus text: rendering only, no daemon."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from mcpd.cli.status_view import local_time, render_status, watch_frame
from mcpd.local.prometheus import label_value, number
from tests.support.parts.status_rows import filled


def status(**daemon: object) -> dict[str, object]:
    retry = datetime(2026, 11, 29, 19, 9, 44, tzinfo=UTC)
    return {
        "daemon": {
            "version": "0.1.0",
            "pid": 42,
            "socket": "/run/mcpd/mcpd.sock",
            "summary": "3 servers: 1 ready, 1 idle, 1 failed (tickets)",
            "tools": 9,
            "connections": 2,
            **daemon,
        },
        "servers": [
            {
                "alias": "notes",
                "state": "ready",
                "era": "modern",
                "tools": 3,
                "calls": 5,
                "p50_ms": 1.25,
                "p99_ms": 4.0,
                "since": None,
            },
            {"alias": "files", "state": "idle", "era": None, "tools": 4, "calls": 0},
            {
                "alias": "tickets",
                "state": "failed",
                "era": None,
                "tools": 2,
                "calls": 1,
                "retry_at": retry.isoformat(),
                "since": retry.isoformat(),
                "last_error": "tickets: cannot connect to http://127.0.0.1:9\nmore detail",
                "stderr": [],
            },
        ],
    }


def test_one_line_per_server_with_the_reason_and_the_retry_in_local_time() -> None:
    text = render_status(filled(status()))
    lines = text.splitlines()
    assert lines[0].startswith("mcpd 0.1.0 (pid 42) on /run/mcpd/mcpd.sock — 3 servers")
    assert lines[1].split()[:3] == ["SERVER", "STATE", "ERA"]
    rows = {line.split()[0]: line for line in lines[2:]}
    assert set(rows) == {"notes", "files", "tickets"}
    local = local_time("2026-11-29T19:09:44+00:00")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", local)  # not today's
    assert local in rows["tickets"]
    assert rows["tickets"].endswith("tickets: cannot connect to http://127.0.0.1:9")
    assert "\x1b[" not in text  # no colour unless asked (stdout is not a terminal)


def test_a_time_today_is_a_clock_time_and_one_on_another_day_has_its_date() -> None:
    now = datetime.now().astimezone()
    noon = now.replace(hour=12, minute=0, second=0, microsecond=0)
    assert local_time(noon.isoformat()) == "12:00:00"
    tomorrow = noon + timedelta(days=1)
    assert local_time(tomorrow.isoformat()) == f"{tomorrow:%Y-%m-%d} 12:00:00"


def test_states_are_coloured_on_a_terminal_and_warnings_shown() -> None:
    text = render_status(
        filled(status(warnings=["130 tools is more than max_tools (128)"])), color=True
    )
    assert "\x1b[32mready" in text
    assert "\x1b[2;32midle" in text
    assert "\x1b[31mfailed" in text
    assert "warning: 130 tools is more than max_tools (128)" in text


def test_watch_frames_clear_a_terminal_and_stack_otherwise() -> None:
    tty = watch_frame("BODY", 2, clear=True)
    assert tty.startswith("\x1b[H\x1b[2Jevery 2 s: mcpd status")
    plain = watch_frame("BODY", 0.5, clear=False)
    assert plain.startswith("every 0.5 s: mcpd status") and plain.endswith("BODY\n\n")


def test_prometheus_labels_and_numbers() -> None:
    assert label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert number(float("inf")) == "+Inf"
    assert number(3) == "3" and number(0.25) == "0.25"
    assert local_time(None) == "-"
    assert local_time((datetime.now(UTC) + timedelta(hours=1)).isoformat()) != "-"


def test_a_host_written_with_non_ascii_letters_in_a_reason_is_shown_in_ascii() -> None:
    data = status()
    servers = data["servers"]
    assert isinstance(servers, list)
    servers[2]["last_error"] = (
        "the server moved to the authorization server https://\u0430ccounts.google.com"
    )
    out = render_status(filled(data))
    assert "\u0430" not in out
    assert "https://xn--ccounts-1fg.google.com (the host xn--ccounts-1fg.google.com" in out


def test_a_server_read_more_slowly_than_it_sends_says_why_under_its_line() -> None:
    shown = status()
    servers = shown["servers"]
    assert isinstance(servers, list)
    since = "2026-11-29T19:09:44+00:00"
    servers[0]["held_back"] = {"reason": "it sends more than mcpd reads", "since": since}
    lines = render_status(filled(shown)).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("notes "))
    said = f"held back| since {local_time(since)}: it sends more than mcpd reads"
    assert lines[at + 1].strip() == said
    assert "held back|" not in render_status(filled(status()))


def test_the_summary_counts_one_of_a_kind_in_the_singular() -> None:
    first = render_status(filled(status(tools=1, prompts=1, resources=0))).splitlines()[0]
    assert first.endswith("; 1 tool, 1 prompt, 0 resources, 2 agent connection(s)"), first
    first = render_status(filled(status(prompts=2, resources=1))).splitlines()[0]
    assert first.endswith("; 9 tools, 2 prompts, 1 resource, 2 agent connection(s)"), first


def test_a_time_no_clock_here_can_show_is_shown_as_written_and_visible() -> None:
    # Past the last day a clock can show once in local time, east or west of UTC.
    for far in ("9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"):
        assert local_time(far) == far
    assert local_time("soon\x1b[2J") == "soon\\x1b[2J"
