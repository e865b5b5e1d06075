"""What a server writes reaches the operator's terminal as text, never as terminal
commands: every command that prints a server's words (a call's result, its error, a
prompt, a resource, status with its stderr tails and errors) shows escapes and hidden
characters as visible escapes; its lists (tools, prompts, resources) and a call's
progress messages come cleaned of them by the daemon."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from mcpd.cli.logins.auth import render_auth_status as render_logins
from mcpd.cli.status_view import render_status
from tests.support.clients.agent import make_config, running
from tests.support.hostile.text_server import HOSTILE
from tests.support.parts.status_rows import filled, login_row

ROOT = Path(__file__).resolve().parents[4]
SERVER = str(ROOT / "tests" / "support" / "hostile" / "text_server.py")
LIMIT = 60

# What must never reach a terminal from a server, and what it is shown as instead.
RAW = ("\x1b", "\r", "\x07", "\u202e", "\u2069", "\u200b", "\U000e0041", "\U000e0042")
SHOWN = ("\\x1b[2K\\r", "\\x1b]8;;https://evil.example\\x07", "\\u202e", "\\u200b", "\\U000e0041")


def problems(out: str) -> list[str]:
    """What is wrong with ``out``: each character printed raw, each escape not shown."""
    raw = [f"{ch!r} raw" for ch in RAW if ch in out]
    return raw + [f"no {escape}" for escape in SHOWN if escape not in out]


def assert_visible(what: str, out: str) -> None:
    assert problems(out) == [], f"{what}:\n{out!r}"


async def mcpd(socket: str, *argv: str) -> tuple[int, str, str]:
    proc = await trio.run_process(
        [sys.executable, "-m", "mcpd", *argv, "--socket", socket],
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=ROOT,
        # Wide enough for a table to show a whole description.
        env={**os.environ, "COLUMNS": "400"},
    )
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


async def test_every_command_shows_a_servers_hidden_characters(tmp_path: Path) -> None:
    servers = {
        "evil": {"command": sys.executable, "args": [SERVER]},
        "broken": {"command": sys.executable, "args": [SERVER, "--fail"]},
    }
    # Its first death is a crash loop, whose retry waits the whole cap (a backoff's
    # jittered wait may be short): "broken" stays down, its stderr shown, throughout.
    cfg = make_config(tmp_path, servers, backoff_base=30, backoff_cap=60, max_restarts=1)
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            sock = daemon.socket_path
            for argv in (("tools",), ("prompts",), ("resources",)):
                code, out, err = await mcpd(sock, *argv)
                assert code == 0, (argv, out, err)
                assert [ch for ch in RAW if ch in out] == [], argv
                assert "shown covered link esrever zerowidth  end" in out, (argv, out)
            outputs: dict[str, str] = {}
            for argv in (
                ("call", "mcp__evil__peek"),
                ("prompt", "mcp__evil__greet"),
                ("read", "file:///hostile"),
            ):
                code, out, err = await mcpd(sock, *argv)
                assert code == 0, (argv, out, err)
                outputs[" ".join(argv)] = out
            code, out, err = await mcpd(sock, "call", "mcp__evil__oops")
            assert code != 0
            # A server's error text reaches every agent cleaned, the CLI among them:
            # nothing is left in it to show escaped but its line break, which the CLI
            # shows as such, on the one line of its failure.
            assert [ch for ch in RAW if ch in err] == [], err
            assert "shown\\ncovered link esrever zerowidth  end" in err, err
            assert err.count("\n") == 1, err
            code, out, err = await mcpd(sock, "status")
            assert code == 0 and "crash_loop" in out, out
            outputs["status"] = out
    wrong = {what: problems(out) for what, out in outputs.items() if problems(out)}
    assert wrong == {}, "\n".join(f"{w}: {outputs[w]!r}" for w in wrong)
    # A result keeps its lines; only what would move the cursor is escaped.
    assert outputs["call mcp__evil__peek"].splitlines()[0] == "first line"
    assert outputs["call mcp__evil__peek"].splitlines()[2] == "last line"
    assert outputs["status"].count("stderr| ") >= 1


async def test_progress_messages_come_cleaned_and_their_line_break_shown(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"evil": {"command": sys.executable, "args": [SERVER]}})
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            code, _, err = await mcpd(daemon.socket_path, "call", "mcp__evil__peek")
    assert code == 0
    assert [f"{ch!r} raw" for ch in RAW if ch in err] == []
    # What would move the cursor, hide or reverse text was taken out by the daemon, as
    # from a server's error texts; the line break a progress line cannot hold is shown.
    assert "mcpd: progress 1/2: shown\\ncovered link esrever zerowidth  end\n" in err


def status_of(error: str, stderr: list[str]) -> dict[str, Any]:
    row = {"alias": "evil", "state": "failed", "last_error": error, "stderr": stderr}
    return {"daemon": {"version": "1", "summary": "1 server: 1 failed"}, "servers": [row]}


def test_status_colours_its_own_text_and_escapes_the_servers() -> None:
    out = render_status(filled(status_of(HOSTILE, [HOSTILE, "plain"])), color=True)
    # mcpd's colour for the state, and no other escape sequence than mcpd's.
    assert "\x1b[31mfailed" in out
    assert out.count("\x1b") == 2 and out.count("\x1b[0m") == 1
    assert "\\x1b[2K\\r" in out and "\\u202e" in out
    assert "\r" not in out and "\u202e" not in out
    plain = render_status(filled(status_of(HOSTILE, [HOSTILE])), color=False)
    assert "\x1b" not in plain


def test_a_last_error_shows_its_first_line_with_what_a_carriage_return_hid() -> None:
    out = render_status(filled(status_of("visible part\rhidden part\nsecond line", [])))
    assert "visible part\\rhidden part" in out and "second line" not in out


def test_logins_show_an_issuers_and_scopes_hidden_characters() -> None:
    row = login_row("evil", issuer=HOSTILE, scopes=[HOSTILE], needs_login=HOSTILE)
    assert_visible("auth status", render_logins([row]))
