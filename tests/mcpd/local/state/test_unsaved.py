"""State that cannot be saved is shown by ``mcpd status``: the pins, the last known
tools and the audit log, each with its file, since when and what is kept in memory
only meanwhile; the journal says when each can be saved again."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.as_operator import MCPD
from tests.support.system.procs import scripted


def status_text(sock: str) -> str:
    proc = subprocess.run(
        [*MCPD, "status", "--socket", sock], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


async def test_status_says_which_state_cannot_be_saved_and_the_journal_when_it_can(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    # What stands where each file is written (even root cannot replace a directory
    # holding something with a file): every write fails until it is gone.
    blocking = [
        state / f"pins.json.{os.getpid()}.tmp",
        state / f"registry.json.{os.getpid()}.tmp",
        state / "calls.jsonl",
    ]
    for path in blocking:
        (path / "in the way").mkdir(parents=True)
    command, args = scripted("--tools", "1")
    config = make_config(
        tmp_path,
        {"code": {"command": command, "args": list(args)}},
        state_dir=str(state),
        audit=True,
        audit_journal=False,
    )
    with trio.fail_after(60):
        async with running(config) as daemon:
            async with connect(daemon.socket_path) as agent:
                await agent.call("mcp__code__tool0", {"text": "x"})
            await daemon.audit.flush()
            assert not await daemon.pins.flush()
            await daemon.state.flush()
            shown = await trio.to_thread.run_sync(status_text, daemon.socket_path)
            for what, path, meaning in [
                ("pins", "pins.json", "approvals made since are kept in memory only"),
                ("last known tools", "registry.json", "servers start with no tools known"),
                ("audit log", "calls.jsonl", "calls since are not recorded in it"),
            ]:
                line = next(x for x in shown.splitlines() if f"cannot save the {what} " in x)
                assert f" to {state / path} since " in line and meaning in line
            for path in blocking:
                shutil.rmtree(path)
            async with connect(daemon.socket_path) as agent:
                await agent.call("mcp__code__tool0", {"text": "y"})
            await daemon.audit.flush()
            assert await daemon.pins.flush()
            await daemon.state.flush()
            shown = await trio.to_thread.run_sync(status_text, daemon.socket_path)
            assert "cannot save" not in shown
    for what, path in [
        ("pins", "pins.json"),
        ("last known tools", "registry.json"),
        ("audit log", "calls.jsonl"),
    ]:
        assert f"the {what} can be saved to {state / path} again (it could not be since" in (
            caplog.text
        )
