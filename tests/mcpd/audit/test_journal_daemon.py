"""The journal's count of calls it did not log one by one says where they are on record
only when they are: with the audit file off, or unable to take their records (as on a
full disk: here the file at the largest size the daemon may write), it says they are in
no record."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from mcpd.audit.journal import BURST
from mcpd.audit.log import FILE_NAME
from tests.support.reading.said import Said
from tests.support.system.procs import scripted

ROOT = Path(__file__).resolve().parents[3]
BURST_AGENT = str(ROOT / "tests" / "support" / "clients" / "call_burst.py")
LIMIT = 90
CALLS = 3 * BURST  # past the journal's budget however slow the machine
ROOM = 600  # bytes the file may still grow by: a record, and part of another


@pytest.mark.parametrize(
    ("audit", "told"),
    [
        ("false", "the audit log is off: they are in no record"),
        ("true", "the audit log could not write them: they are in no record"),
        ("true-fits", "every call is in the audit log (mcpd calls)"),
    ],
)
async def test_the_journal_says_where_the_calls_it_left_out_are(
    tmp_path: Path, audit: str, told: str
) -> None:
    state, sock = tmp_path / "state", tmp_path / "mcpd.sock"
    command, args = scripted("--names", "read")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[daemon]\nsocket = "{sock}"\nstate_dir = "{state}"\n'
        f"audit = {'false' if audit == 'false' else 'true'}\n"
        f"[servers.gh]\ncommand = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPD_")}
    argv = [sys.executable, "-m", "mcpd", "serve", "--config", str(config), "--log", "stderr"]
    proc = await trio.lowlevel.open_process(argv, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    assert proc.stderr is not None
    said = Said(proc.stderr)
    calls = json.dumps([["mcp__gh__read", {}]] * CALLS)
    try:
        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(said.read)
                await said.wait_for("ready")
                if audit == "true":
                    _, hard = resource.prlimit(proc.pid, resource.RLIMIT_FSIZE)
                    size = (state / FILE_NAME).stat().st_size
                    resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (size + ROOM, hard))
                agent = [sys.executable, BURST_AGENT, str(sock), "default", "modern", calls]
                done = await trio.run_process(agent, capture_stdout=True, check=True)
                assert len(json.loads(done.stdout)["results"]) == CALLS
                proc.terminate()  # the daemon stops: the journal says what it left out
                assert await proc.wait() == 0, said.text
    finally:
        with trio.CancelScope(shield=True):
            proc.kill()
            await proc.wait()
    [summary] = [line for line in said.text.splitlines() if "not logged one by one" in line]
    assert told in summary, summary
    if audit == "false":
        assert not (state / FILE_NAME).exists()
