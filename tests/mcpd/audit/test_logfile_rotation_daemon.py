"""An agent that calls fast enough rotates the earliest records out of the audit files:
a running daemon's log warns, once a minute at most, up to when the records it let go
were written, and how to keep more; ``mcpd calls`` says when the log it reads begins
rather than count its calls as though they were all there ever were."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
import trio

from mcpd.audit.reader import AuditRecords
from mcpd.config.loading.load import load
from tests.support.clients.agent import connect, running
from tests.support.system.procs import scripted

ROOT = Path(__file__).resolve().parents[3]
BURST_AGENT = str(ROOT / "tests" / "support" / "clients" / "call_burst.py")
LIMIT = 90
CALLS = 600  # some 400 bytes each: past two files of the smallest cap


async def test_records_rotated_away_are_warned_of_and_the_log_says_where_it_begins(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state, sock = tmp_path / "state", tmp_path / "mcpd.sock"
    command, args = scripted("--names", "read")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[daemon]\nsocket = "{sock}"\nstate_dir = "{state}"\naudit_journal = false\n'
        "audit_max_bytes = 65536\naudit_files = 1\n"
        f"[servers.gh]\ncommand = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"
    )
    calls = json.dumps([["mcp__gh__read", {}]] * CALLS)
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.audit"):
        async with running(load(config), str(config)) as daemon:
            async with connect(daemon.socket_path) as agent:
                await agent.call("mcp__gh__read", {"text": "the first"})
            await daemon.oversight.audit.flush()
            agent_argv = [sys.executable, BURST_AGENT, str(sock), "default", "modern", calls]
            await trio.run_process(agent_argv, capture_stdout=True, check=True)
            await daemon.oversight.audit.flush()
    kept = list(AuditRecords(str(state)))
    assert all(r.args_bytes != len('{"text":"the first"}') for r in kept)  # rotated away
    [warning] = [r.getMessage() for r in caplog.records if "rotated away" in r.getMessage()]
    assert warning.startswith("audit records written up to ")
    assert warning.endswith(
        "were rotated away with the oldest of 1 files; to keep more, raise "
        "audit_max_bytes or audit_files"
    )
    env = {k: v for k, v in os.environ.items() if k != "MCPD_CONFIG"}
    told = subprocess.run(
        [sys.executable, "-m", "mcpd", "calls", "--config", str(config), "--last", "1"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60, check=True,
    ).stderr  # fmt: skip
    begins = datetime.fromtimestamp(kept[0].ts).strftime("%Y-%m-%d %H:%M:%S")
    assert f"1 of {len(kept)} calls in {state}, the log beginning at {begins}: older " in told
    assert "records are rotated away as it grows (audit_max_bytes, audit_files)" in told
