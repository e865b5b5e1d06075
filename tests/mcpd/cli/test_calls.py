"""``mcpd calls`` in the process: ``--since`` read as a duration ago or a local date,
``--agent`` as a pid, a uid or a user name, and every value it cannot read a usage error
that names it; the table and the JSON lines with what agents and servers wrote made
visible, so that no name or reason in the log acts on the terminal."""

from __future__ import annotations

import argparse
import json
import os
import pwd
from datetime import datetime
from pathlib import Path

import msgspec
import pytest

from mcpd.audit.log import AuditLog
from mcpd.audit.reader import Choice
from mcpd.audit.record import CallRecord
from mcpd.audit.summed import BURST
from mcpd.cli.calls import _agent, cmd_calls, render_calls, since
from mcpd.config.tables.model import DaemonConfig
from mcpd.policy.agent import AgentInfo
from tests.support.daemons.fake import FakeDaemon, result
from tests.support.parts.status_rows import daemon as daemon_status
from tests.support.parts.status_rows import document

NOW = 1_800_000_000.0
# What an agent may ask for and a server may answer: a terminal's escapes, in their
# 7-bit and 8-bit forms, a bidi override, a zero-width space, DEL.
HOSTILE = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202eevil\u200b\x7f"
TERMINAL = ("\x1b", "\x07", "\x9b", "\u202e", "\u200b", "\x7f")


def usage_error(capsys: pytest.CaptureFixture[str], *call: object) -> str:
    fn, *args = call
    with pytest.raises(SystemExit) as info:
        fn(*args)  # type: ignore[operator]
    assert info.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "ago"),
    [
        ("90s", 90),
        ("30m", 1800),
        ("30min", 1800),
        ("1h", 3600),
        ("2d", 172_800),
        ("1.5h", 5400),
        ("0s", 0),
        (" 45 s ", 45),
        ("10 min", 600),
    ],
)
def test_since_reads_a_duration_ago(text: str, ago: float) -> None:
    assert since(text, now=NOW) == NOW - ago


def test_since_reads_a_local_date_and_time() -> None:
    assert since("2026-08-01T10:00", now=NOW) == datetime(2026, 8, 1, 10, 0).timestamp()
    assert since("2026-08-01", now=NOW) == datetime(2026, 8, 1).timestamp()
    aware = since("2026-08-01T10:00+02:00", now=NOW)
    assert aware == datetime.fromisoformat("2026-08-01T08:00+00:00").timestamp()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yesterday",
        "90",
        "-1h",
        "1h ago",
        "90S",
        "1y",
        "1e3s",
        "2026-13-01",
        "\u0661h",
        "1 hour",
    ],
)
def test_since_refuses_what_it_cannot_read_and_says_what_it_takes(
    capsys: pytest.CaptureFixture[str], text: str
) -> None:
    err = usage_error(capsys, since, text, NOW)
    assert f"--since {text!r}" in err
    assert "90s, 30m, 1h, 2d" in err


def test_since_names_a_hostile_value_without_printing_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(capsys, since, HOSTILE, NOW)
    assert "--since" in err
    assert not any(ch in err for ch in TERMINAL)


def test_agent_is_a_pid_a_uid_or_a_user_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert _agent("4242", Choice()) == Choice(agent=4242)  # a pid or a uid
    assert _agent(pwd.getpwuid(os.getuid()).pw_name, Choice()) == Choice(uid=os.getuid())
    for bad in ("no-such-user-x", "\u00b2", "-1", "4 2"):
        assert f"--agent {bad!r}" in usage_error(capsys, _agent, bad, Choice())


def test_an_agent_of_too_many_digits_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert "not a pid, a uid or a user name" in usage_error(capsys, _agent, "9" * 5000, Choice())


def record(n: int, **kw: object) -> CallRecord:
    fields: dict[str, object] = {
        "ts": NOW + n,
        "agent": AgentInfo(uid=1000, pid=500 + n, exe="claude"),
        "method": "tools/call",
        "name": f"notes__t{n}",
        "original": f"t{n}",
        "server": "notes",
        "outcome": "ok",
        "duration_ms": 12.4,
        **kw,
    }
    return CallRecord(**fields)  # type: ignore[arg-type]


def test_the_table_makes_what_agents_and_servers_wrote_visible() -> None:
    hostile = record(
        1,
        name=HOSTILE,
        server=HOSTILE,
        agent=AgentInfo(pid=7, exe=HOSTILE, connection=HOSTILE),
        outcome="tool_error",
        reason=HOSTILE,
        decided_by=HOSTILE,
    )
    table = render_calls([record(0), hostile])
    assert not any(ch in table for ch in TERMINAL)
    assert "\\x1b[2J" in table and "\\u202e" in table
    lines = table.splitlines()
    assert lines[0].split() == ["TIME", "AGENT", "SERVER", "TOOL", "DECISION", "OUTCOME", "MS"]
    assert lines[1].split()[-2:] == ["ok", "12"]
    assert lines[-2] == "why:"


def test_a_reason_is_shown_only_for_a_call_that_failed() -> None:
    table = render_calls([record(0, reason="kept for the record"), record(1, outcome="refused")])
    assert "why:" not in table and "kept for the record" not in table


async def written(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    log = AuditLog(str(state), DaemonConfig(audit_journal=False))
    log.record(record(0))
    log.record(record(1, name=HOSTILE, outcome="error", reason=HOSTILE))
    await log.flush()
    log._close()
    config = tmp_path / "config.toml"
    config.write_text(f'[daemon]\nstate_dir = "{state}"\n')
    return config


def args(config: Path, **kw: object) -> argparse.Namespace:
    base: dict[str, object] = {
        "since": None,
        "server": None,
        "tool": None,
        "agent": None,
        "failed": False,
        "json": False,
        "last": 100,
        "config": str(config),
    }
    return argparse.Namespace(**{**base, **kw})


async def test_json_lines_hold_the_records_with_nothing_that_acts_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = await written(tmp_path)
    assert cmd_calls(args(config, json=True)) == 0
    out = capsys.readouterr().out
    assert not any(ch in out for ch in TERMINAL)
    first, second = (json.loads(line) for line in out.splitlines())
    assert first["name"] == "notes__t0"
    # A program reading the lines gets what was written, escapes and all.
    assert second["name"] == HOSTILE and second["reason"] == HOSTILE


async def test_the_last_n_and_a_negative_n(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = await written(tmp_path)
    assert cmd_calls(args(config, json=True, last=1)) == 0
    captured = capsys.readouterr()
    assert [json.loads(line)["ts"] for line in captured.out.splitlines()] == [NOW + 1]
    err = usage_error(capsys, cmd_calls, args(config, last=-1))
    assert "--last must be 0 (all) or more" in err


@pytest.mark.parametrize("where", ["the state directory", "the current file"])
async def test_a_log_that_cannot_be_read_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    config = await written(tmp_path)
    state = tmp_path / "state"
    if where == "the state directory":
        for name in os.listdir(state):
            (state / name).unlink()
        state.rmdir()
        state.write_text("not a directory\n")
    else:
        (state / "calls.jsonl").unlink()
        (state / "calls.jsonl").mkdir()
        # The rest of the log is shown; the file is named, as no file of mcpd's.
        assert cmd_calls(args(config)) == 1
        err = capsys.readouterr().err
        assert f"mcpd: {state / 'calls.jsonl'} is not a regular file (a directory of " in err
        assert "Traceback" not in err
        return
    with pytest.raises(SystemExit) as info:
        cmd_calls(args(config))
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("mcpd: cannot read the audit log in ") and str(state) in err
    assert "Traceback" not in err and len(err.splitlines()) == 1


async def test_without_a_config_the_log_is_the_running_daemons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A daemon started without a config file (the demo) keeps its state elsewhere.
    await written(tmp_path)
    sock = tmp_path / "mcpd.sock"
    state_file = str(tmp_path / "state" / "state.json")
    said = msgspec.to_builtins(document(daemon_status(config="", state_file=state_file)))
    monkeypatch.delenv("MCPD_CONFIG", raising=False)
    monkeypatch.setenv("MCPD_SOCKET", str(sock))
    without_config = args(tmp_path, json=True)
    without_config.config = None
    with FakeDaemon(sock, lambda msg: result(msg, said)):
        assert cmd_calls(without_config) == 0
    assert [json.loads(line)["name"] for line in capsys.readouterr().out.splitlines()] == [
        "notes__t0",
        HOSTILE,
    ]


def summary(n: int, count: int, **kw: object) -> CallRecord:
    """A record standing for ``count`` requests refused before any server."""
    fields: dict[str, object] = {
        "server": None,
        "original": None,
        "name": "x",
        "outcome": "refused",
        "reason": "unknown tool",
        "decision": "none",
        "count": count,
        "last_ts": NOW + n + 3.5,
        **kw,
    }
    return record(n, **fields)


def test_a_summary_shows_how_many_calls_it_stands_for_and_when() -> None:
    table = render_calls([record(0), summary(1, 5000, name=HOSTILE)])
    assert not any(ch in table for ch in TERMINAL)
    lines = table.splitlines()
    row = lines[2].split()
    assert row[-3:] == ["refused", "\u00d75000", "-"]
    assert "counted, not recorded one by one (past their agent's budget):" in lines
    first, last = (datetime.fromtimestamp(NOW + t).strftime("%H:%M:%S") for t in (1, 4.5))
    assert lines[-1].startswith(f"  {first} to {last}: 5000 tools/call of pid 501 (claude)")
    assert lines[-1].endswith("the first \\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202eevil\\u200b\\x7f")


async def test_summaries_are_among_the_failed_calls_and_counted_as_their_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    log = AuditLog(str(state), DaemonConfig(audit_journal=False), clock=lambda: 0.0)
    log.record(record(0))
    flooder = AgentInfo(uid=1000, pid=66, exe="python3")
    for n in range(1, 1000):
        log.unrouted(record(n, agent=flooder, server=None, original=None, name="x",
                            outcome="refused"))  # fmt: skip
    await log.flush()
    log._close()
    config = tmp_path / "config.toml"
    config.write_text(f'[daemon]\nstate_dir = "{state}"\n')
    assert cmd_calls(args(config, json=True, failed=True, last=0)) == 0
    failed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    *one_by_one, counted = failed
    assert len(one_by_one) == BURST
    assert (counted["count"], counted["name"], counted["outcome"]) == (999 - BURST, "x", "refused")
    assert counted["last_ts"] == NOW + 999
    assert cmd_calls(args(config, last=3)) == 0
    captured = capsys.readouterr()
    assert f"\u00d7{999 - BURST}" in captured.out
    assert f"{999 - BURST + 2} of 1000 calls in {state}" in captured.err
