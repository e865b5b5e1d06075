"""A stdio server's helper that called setsid() goes when its server does: at each
restart, and when mcpd stops; found by its start's mark without a sandbox, and taken
down with its sandbox's PID namespace in one."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest
import trio

from tests.support.agent import connect, make_config, running
from tests.support.procs import alive, read_pid, wait_gone
from tests.support.supervision import server, text, wait_state


async def _new_pid(path: Path, old: int) -> int:
    while True:
        with contextlib.suppress(ProcessLookupError):  # the old one's, gone with its sandbox
            pid = await read_pid(path)
            if pid != old:
                return pid
        await trio.sleep(0.05)


@pytest.mark.parametrize("sandbox", ["off", "default"])
async def test_a_helper_outside_the_process_group_goes_at_restart_and_at_stop(
    tmp_path: Path, sandbox: str
) -> None:
    pid_file = tmp_path / "helper.pid"
    dies = server("--setsid-helper", str(pid_file), "--die-on-call") | {"sandbox": sandbox}
    cfg = make_config(tmp_path, {"dies": dies})
    helpers: list[int] = []
    try:
        with trio.fail_after(40):
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                await wait_state(agent, "dies", "ready")
                helpers.append(await read_pid(pid_file))
                died = await agent.call("mcp__dies__tool0")
                assert "exited with status 3" in text(died), text(died)
                # Restarted: the first start's helper went with it, the new start has one.
                helpers.append(await _new_pid(pid_file, helpers[0]))
                assert await wait_gone(helpers[0])
                await wait_state(agent, "dies", "ready")
                assert alive(helpers[1])
            assert await wait_gone(helpers[1])
    finally:
        for pid in helpers:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
