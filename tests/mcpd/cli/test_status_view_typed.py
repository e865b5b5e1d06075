"""``mcpd status`` for people, drawn from the status document's types as the command
line decodes them: each part of a server's row, a profile's view, and what the daemon
says of itself beside its servers."""

from __future__ import annotations

from mcpd.cli.status_view import (
    held_notes,
    local_time,
    login_lines,
    masked_notes,
    pin_notes,
    profile_lines,
    render_status,
    trim_notes,
)
from mcpd.policy.agent import AgentInfo
from mcpd.server_row import HeldBackRow
from mcpd.status_document import AuditStatus, PendingView, Unsaved
from tests.support.parts.status_rows import daemon, document, profile, sandbox, server_row

SINCE = "2026-11-29T19:09:44+00:00"


def test_a_rows_notes_say_what_its_lists_left_out_what_waits_and_what_was_masked() -> None:
    row = server_row(
        "notes",
        dropped_tools=["t: no name"],
        dropped_resource_templates=["r: no URI"],
        cut=["instructions cut"],
        held=2,
        findings=1,
        secrets_masked={"env:B": 1, "env:A": 2},
        held_back=HeldBackRow(reason="it sends more than mcpd reads", since=SINCE),
    )
    assert trim_notes(row) == [
        "dropped tools| t: no name",
        "dropped resource templates| r: no URI",
        "cut| instructions cut",
    ]
    assert pin_notes(row, whole=True) == [
        "held| 2 item(s) wait for approval: mcpd approve notes",
        "findings| 1 item(s) flagged: mcpd tools --findings",
    ]
    there = ", on mcpd's own socket, for its own user"
    assert pin_notes(row, whole=False)[0].endswith(f"mcpd approve notes{there}")
    assert masked_notes(row) == ["secrets masked| 3 in what it sent: env:A (2), env:B (1)"]
    assert held_notes(row) == [
        f"held back| since {local_time(SINCE)}: it sends more than mcpd reads"
    ]
    quiet = server_row("quiet")
    assert trim_notes(quiet) == pin_notes(quiet, whole=True) == masked_notes(quiet) == []
    assert held_notes(quiet) == []


def test_servers_waiting_for_a_login_are_named_under_a_listing() -> None:
    rows = [server_row("web", state="needs_login"), server_row("files", state="ready")]
    assert login_lines(rows) == [
        "web waits for a login, so none of its tools is listed: mcpd auth login web"
    ]


def test_profiles_say_what_they_expose_and_warn() -> None:
    lines = profile_lines(
        [
            profile("default", tools=3, listed=3, agents=1),
            profile("narrow", discovery="auto", mode="search", socket="/p.sock", warning="big"),
        ]
    )
    assert lines[0].split() == ["PROFILE", "DISCOVERY", "TOOLS", "LISTED", "AGENTS", "NAMES"]
    assert lines[1].split() == ["default", "all", "3", "3", "1", "mcp__{alias}__{tool}", "<=", "64"]
    assert lines[2].startswith("narrow           auto (search)")
    assert lines[2].endswith("<= 64  on /p.sock")
    assert lines[3] == "warning: big"


def test_a_profiles_view_names_its_profile_and_where_approving_answers() -> None:
    status = document(
        daemon(version="1.2", profile="narrow", summary="1 server", tools=1),
        [server_row("notes", state="ready", held=1)],
        [profile("narrow")],
    )
    lines = render_status(status).splitlines()
    assert lines[0] == (
        "mcpd 1.2 (profile narrow) — 1 server; 1 tool, 0 prompts, 0 resources, "
        "0 agent connection(s)"
    )
    assert lines[3].strip().endswith("mcpd approve notes, on mcpd's own socket, for its own user")


def test_the_whole_status_says_what_the_daemon_cannot_save_waits_for_and_dropped() -> None:
    agent = AgentInfo(uid=1000, pid=42)
    waiting = PendingView(
        id="a1",
        agent=agent,
        tool="mcp__notes__rm",
        server="notes",
        original="rm",
        arguments="{}",
        rule=1,
        reason=None,
        asked="operator",
        since=SINCE,
        deadline=SINCE,
    )
    status = document(
        daemon(
            pid=7,
            socket="/s",
            unsaved=[Unsaved("pins", "/state/pins.json", SINCE, "disk full", "kept in memory")],
            held=1,
            http="http://127.0.0.1:8765/mcp",
        ),
        [
            server_row("broken", state="failed", stderr=["boom"], sandbox=sandbox("strict")),
            server_row("bare", state="ready", stderr=["quiet"]),
        ],
    )
    status.approvals = [waiting]
    status.audit = AuditStatus(file=None, journal=False, written=3, dropped=2, write_errors=0)
    lines = render_status(status).splitlines()
    assert lines[0].startswith("mcpd  (pid 7) on /s — ")
    assert lines[1] == (
        f"cannot save the pins to /state/pins.json since {local_time(SINCE)} (disk full): "
        "kept in memory"
    )
    assert lines[2] == "held: 1 item waits for approval (mcpd tools --pending)"
    assert [line.strip() for line in lines if "stderr|" in line] == ["stderr| boom"]
    assert lines[-3] == "HTTP endpoint: http://127.0.0.1:8765/mcp (bearer token: `mcpd token`)"
    assert lines[-2] == (
        f"1 call(s) wait for approval, since {local_time(SINCE)}: `mcpd approvals`"
    )
    assert lines[-1] == "audit log: 2 records not written (the writer fell behind)"


def test_a_sandbox_that_could_not_be_applied_whole_is_said_under_its_server() -> None:
    box = sandbox("strict")
    box.unprotected = "landlock is not available"
    status = document(servers=[server_row("files", state="ready", sandbox=box)])
    assert render_status(status).splitlines()[-1] == (
        f"{'':<16} unprotected| landlock is not available"
    )
