"""``mcpd call`` of a tool a rule asks a person about: it says on stderr, as the wait
begins, that the call waits for a person and how to decide it (the call's id), then
ends with the person's decision."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trio

from tests.support.daemons.policy import LIMIT, policy_daemon

ROOT = Path(__file__).resolve().parents[3]


async def test_a_call_that_waits_for_a_person_says_so_and_how_to_decide_it(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup:
            argv = [sys.executable, "-m", "mcpd", "call", "mcp__gh__create_issue", "{}"]
            sock = setup.daemon.socket_path
            proc = await trio.lowlevel.open_process(
                [*argv, "--socket", sock],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=ROOT,
            )
            assert proc.stderr is not None and proc.stdout is not None
            said = b""
            while b"\n" not in said:  # the call waits until someone decides it
                chunk = await proc.stderr.receive_some()
                assert chunk, said
                said += chunk
            (waiting,) = await setup.pending()
            assert said.decode() == (
                f"mcpd: this call waits for a person's approval (up to 120 s): in another "
                f"terminal, one that never ran an agent of mcpd's, `mcpd approvals approve "
                f"{waiting.id}` (or `deny {waiting.id}`); `mcpd approvals` lists what waits\n"
            )
            setup.daemon.approvals.decide(waiting.id, True, "a person")
            assert await proc.wait() == 0
