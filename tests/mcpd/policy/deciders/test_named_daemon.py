"""The agent ``mcpd approve`` names when it refuses, through a running daemon, as the
kernel says it is when the refusal is made: an agent's process that exec'd another
program since it connected is named by the program it runs now, and by the one it ran
when it connected."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import trio

from tests.support.clients.agent import make_config, running
from tests.support.clients.self_approval import ROOT

LIMIT = 30

# Connects as an agent, then becomes a shell (the same process, the connection kept
# open) that runs ``mcpd approve`` and prints what it said.
EXECS = """
import os, sys
from tests.support.clients.self_approval import connected
sock = sys.argv[1]
held = connected(sock)
os.set_inheritable(held.fileno(), True)
approve = f"{sys.executable} -m mcpd approve tickets --yes --socket {sock} 2>&1"
os.execv("/bin/sh", ["sh", "-c", approve + " </dev/null; echo pid $$"])
"""


async def test_an_agent_that_exec_d_a_shell_is_named_as_one(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with running(make_config(tmp_path, {})) as daemon:
            done = await trio.run_process(
                [sys.executable, "-c", EXECS, daemon.socket_path],
                cwd=ROOT,
                capture_stdout=True,
                check=False,
            )
    said = done.stdout.decode()
    pid = said.rsplit("pid ", 1)[1].strip()
    now, then = Path(os.path.realpath("/bin/sh")).name, Path(sys.executable).resolve().name
    assert now != then
    assert f"is an agent connected to mcpd (pid {pid}, now {now}, {then} when it connected)" in (
        said
    ), said
