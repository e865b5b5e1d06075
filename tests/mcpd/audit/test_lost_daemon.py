"""Records the file could not take (as on a full disk: here the file at the largest size
the daemon may write) leave a trace in it once it takes records again: a gap line that
says how many calls' records were lost and from when to when, which ``mcpd calls``
tells as it tells the records the writer dropped."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import trio

from mcpd.audit.log import FILE_NAME
from tests.support.clients.agent import connect
from tests.support.reading.said import Said

ROOT = Path(__file__).resolve().parents[3]
MCPD = [sys.executable, "-m", "mcpd"]
LIMIT = 60
LOST = 20  # calls made while the file takes no more
AFTER = 3  # calls made once it does again
ROOM = 600  # bytes the file may still grow by: a record, and part of another


async def call_all(sock: Path, prefix: str, count: int) -> None:
    async with connect(str(sock)) as agent:
        for n in range(count):
            reply = await agent.rpc("tools/call", {"name": f"{prefix}_{n}", "arguments": {}})
            assert "error" in reply or reply["result"]["isError"], reply


def mcpd_calls(config: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MCPD_CONFIG"}
    return subprocess.run(
        [*MCPD, "calls", "--config", str(config), "--last", "0", *argv],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60, check=True,
    )  # fmt: skip


async def test_records_the_file_could_not_take_leave_a_gap_once_it_takes_them_again(
    tmp_path: Path,
) -> None:
    state, sock = tmp_path / "state", tmp_path / "mcpd.sock"
    config = tmp_path / "config.toml"
    config.write_text(
        f'[daemon]\nsocket = "{sock}"\nstate_dir = "{state}"\naudit_journal = false\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPD_")}
    argv = [*MCPD, "serve", "--config", str(config), "--log", "stderr"]
    proc = await trio.lowlevel.open_process(argv, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    assert proc.stderr is not None
    said = Said(proc.stderr)
    try:
        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(said.read)
                await said.wait_for(f"listening on {sock}")
                _, hard = resource.prlimit(proc.pid, resource.RLIMIT_FSIZE)
                size = (state / FILE_NAME).stat().st_size
                resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (size + ROOM, hard))
                await call_all(sock, "lost", LOST)
                await said.wait_for("cannot write the audit log")
                resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (hard, hard))
                await call_all(sock, "after", AFTER)
                proc.terminate()
                assert await proc.wait() == 0, said.text
    finally:
        with trio.CancelScope(shield=True):
            proc.kill()
            await proc.wait()
    shown = [json.loads(line) for line in mcpd_calls(config, "--json").stdout.splitlines()]
    names = [r["name"] for r in shown]
    written = len([n for n in names if n.startswith("lost_")])
    assert 0 < written < LOST and names[written:] == [f"after_{n}" for n in range(AFTER)]
    # Before the records written once the file took them again.
    tail = (state / FILE_NAME).read_text().splitlines()[-AFTER - 1 :]
    assert '"lost"' in tail[0], tail
    gap = json.loads(tail[0])
    assert gap["lost"] == LOST - written, gap
    assert shown[written - 1]["ts"] <= gap["first_ts"] <= gap["last_ts"] <= shown[written]["ts"]
    span = " to ".join(
        datetime.fromtimestamp(gap[at]).strftime("%H:%M:%S") for at in ("first_ts", "last_ts")
    )
    told = mcpd_calls(config).stderr
    assert f"mcpd: {LOST - written} calls were lost from {span}: the log" in told, told
