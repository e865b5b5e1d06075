"""``mcpd calls`` as a person runs it: the audit log read from the state directory the
config names, with no daemon running, narrowed by time, server, tool, agent and
failure, as a table or as JSON lines."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

import pytest

from mcpd.audit.log import AuditLog
from mcpd.audit.record import AuditOutcome, CallRecord
from mcpd.cli.calls import since
from mcpd.config.tables.model import DaemonConfig
from mcpd.policy.agent import AgentInfo

ROOT = Path(__file__).resolve().parents[3]
NOW = time.time()
# Between two records (they are 7.2 s apart), an hour before the last ones.
SINCE = NOW - 3600 + 3.6
AGENTS = [
    AgentInfo(uid=1000 + i % 2, pid=500 + i, exe="claude" if i % 2 else "codex",
              profile="ci" if i < 4 else "default", connection=f"c{i}", era="modern")
    for i in range(8)
]  # fmt: skip
SERVERS = ("notes", "github", "tickets")
OUTCOMES: tuple[AuditOutcome, ...] = get_args(AuditOutcome)


def records() -> list[CallRecord]:
    """1,000 calls of 8 agents, two profiles, every outcome, the oldest 2 hours ago."""
    out = []
    for n in range(1000):
        server = SERVERS[n % 3]
        outcome = OUTCOMES[n % 7] if n % 2 else "ok"
        out.append(
            CallRecord(
                ts=NOW - 7200 + n * 7.2,
                agent=AGENTS[n % 8],
                method="tools/call",
                name=f"mcp__{server}__tool{n % 5}",
                original=f"tool{n % 5}",
                server=server,
                outcome=outcome,  # type: ignore[arg-type]
                decision="deny" if outcome == "refused" else "allow",
                decided_by="policy[0]" if outcome == "refused" else "default",
                reason="no" if outcome == "refused" else None,
                duration_ms=float(n % 50),
            )
        )
    return out


@pytest.fixture
async def logged(tmp_path: Path) -> Path:
    """A config whose state directory holds the 1,000 records (over two files)."""
    state = tmp_path / "state"
    log = AuditLog(str(state), DaemonConfig(audit_journal=False, audit_max_bytes=200_000))
    for r in records():
        log.record(r)
    await log.flush()
    log._close()
    assert (state / "calls.jsonl.1").exists()
    config = tmp_path / "config.toml"
    config.write_text(f'[daemon]\nstate_dir = "{state}"\n')
    return config


def calls(config: Path, *argv: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MCPD_CONFIG"}
    proc = subprocess.run(
        [sys.executable, "-m", "mcpd", "calls", "--config", str(config), *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    return proc.returncode, proc.stdout, proc.stderr


def chosen(config: Path, *argv: str) -> list[dict[str, Any]]:
    code, out, err = calls(config, "--json", "--last", "0", *argv)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def expected(**want: Any) -> list[CallRecord]:
    keep = []
    for r in records():
        if "server" in want and r.server != want["server"]:
            continue
        if "since" in want and r.ts < want["since"]:
            continue
        if "agent" in want and want["agent"] not in (r.agent.pid, r.agent.uid):
            continue
        if want.get("failed") and r.outcome == "ok":
            continue
        if "original" in want and r.original != want["original"]:
            continue
        keep.append(r)
    return keep


async def test_every_record_is_read_back_in_order(logged: Path) -> None:
    everything = chosen(logged)
    assert len(everything) == 1000
    assert [r["ts"] for r in everything] == [r.ts for r in records()]
    assert {r["agent"]["profile"] for r in everything} == {"ci", "default"}


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["--server", "github"], {"server": "github"}),
        (["--server", "git*"], {"server": "github"}),
        (["--agent", "503"], {"agent": 503}),
        (["--agent", "1001"], {"agent": 1001}),
        (["--failed"], {"failed": True}),
        (["--tool", "mcp__notes__tool2"], {"server": "notes", "original": "tool2"}),
        (["--tool", "tickets/tool4"], {"server": "tickets", "original": "tool4"}),
        (["--since", datetime.fromtimestamp(SINCE).isoformat()], {"since": SINCE}),
        (["--failed", "--server", "notes", "--agent", "1001"],
         {"failed": True, "server": "notes", "agent": 1001}),
    ],
)  # fmt: skip
async def test_filters_choose_the_records(
    logged: Path, argv: list[str], want: dict[str, Any]
) -> None:
    got = chosen(logged, *argv)
    wanted = expected(**want)
    assert 0 < len(wanted) < 1000
    assert [r["ts"] for r in got] == [r.ts for r in wanted]


async def test_the_table_shows_the_last_ones_and_why(logged: Path) -> None:
    code, out, err = calls(logged, "--failed", "--last", "5")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["TIME", "AGENT", "SERVER", "TOOL", "DECISION", "OUTCOME", "MS"]
    rows = lines[1:6]
    assert len(rows) == 5 and all(r.split()[-2] in OUTCOMES for r in rows)
    last = records()[-1] if records()[-1].failed else expected(failed=True)[-1]
    assert f"pid {last.agent.pid} ({last.agent.exe})" in rows[-1]
    assert "5 of 1000 calls" in err
    refused = [r for r in rows if "refused" in r]
    assert all("deny policy[0]" in r for r in refused)


async def test_without_a_log_it_says_so(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[daemon]\nstate_dir = "{tmp_path / "empty"}"\n')
    code, _out, err = calls(config)
    assert code == 0 and "no audit log" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--since", "yesterday-ish"],
        ["--agent", "no-such-user-x"],
        # A digit to str.isdigit() that int() does not read.
        ["--agent", "\u00b2"],
    ],
)
async def test_bad_filters_are_usage_errors(logged: Path, argv: list[str]) -> None:
    code, _, err = calls(logged, *argv)
    assert code == 2 and argv[1] in err


def test_since_reads_durations_and_dates() -> None:
    assert since("90s", now=1000.0) == 910.0
    assert since("2h", now=10_000.0) == 2800.0
    assert since("1.5d", now=200_000.0) == 200_000.0 - 1.5 * 86400
    assert since("2026-08-01T10:00") > 0


def test_an_agent_can_be_named_by_user_name(tmp_path: Path) -> None:
    name = pwd.getpwuid(os.getuid()).pw_name
    config = tmp_path / "config.toml"
    config.write_text(f'[daemon]\nstate_dir = "{tmp_path / "empty"}"\n')
    assert calls(config, "--agent", name)[0] == 0


async def test_a_user_name_chooses_that_users_calls_never_a_process_of_that_number(
    tmp_path: Path,
) -> None:
    """A user's uid may be the pid another user's agent had: naming the user shows the
    user's calls only, while the number itself still chooses both."""
    me = os.getuid()
    state = tmp_path / "state"
    log = AuditLog(str(state), DaemonConfig(audit_journal=False))
    mine = AgentInfo(uid=me, pid=me + 40_000, exe="claude")
    theirs = AgentInfo(uid=me + 1, pid=me, exe="codex")
    for n, agent in enumerate((mine, theirs, mine)):
        log.record(CallRecord(ts=NOW + n, agent=agent, method="tools/call", outcome="ok"))
    await log.flush()
    log._close()
    config = tmp_path / "config.toml"
    config.write_text(f'[daemon]\nstate_dir = "{state}"\n')
    by_name = chosen(config, "--agent", pwd.getpwuid(me).pw_name)
    assert [(r["agent"]["uid"], r["agent"]["pid"]) for r in by_name] == [(me, me + 40_000)] * 2
    assert len(chosen(config, "--agent", str(me))) == 3
