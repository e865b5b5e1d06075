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

from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.supervision import server, text, wait_state
from tests.support.system.procs import alive, read_pid, wait_gone
from transports.stdio.process import pidgroup


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
                # Serving again: ``degraded`` for ``stable_after`` after the call it died in.
                await wait_state(agent, "dies", "ready", "degraded")
                assert alive(helpers[1])
            assert await wait_gone(helpers[1])
    finally:
        for pid in helpers:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


async def test_a_helper_that_cleared_its_environment_goes_with_a_root_mcpds_server(
    tmp_path: Path,
) -> None:
    # Out of the session, its parent gone, without the start mark: only the server's
    # own pids cgroup, which a root mcpd makes, still holds it.
    if os.geteuid() != 0:
        pytest.skip("a server's own pids cgroup is made only by a root mcpd")
    if pidgroup.base() is None:
        pytest.skip("no pids cgroup hierarchy mcpd may write (v1 pids, or v2 at its root)")
    pid_file = tmp_path / "helper.pid"
    dies = server("--bare-helper", str(pid_file), "--die-on-call") | {"sandbox": "off"}
    cfg = make_config(tmp_path, {"dies": dies})
    helpers: list[int] = []
    try:
        with trio.fail_after(40):
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                await wait_state(agent, "dies", "ready")
                helpers.append(await read_pid(pid_file))
                with open(f"/proc/{helpers[0]}/environ", "rb") as f:
                    assert b"MCPD_SERVER_START" not in f.read()
                died = await agent.call("mcp__dies__tool0")
                assert "exited with status 3" in text(died), text(died)
                helpers.append(await _new_pid(pid_file, helpers[0]))
                assert await wait_gone(helpers[0])
                # Serving again: ``degraded`` for ``stable_after`` after the call it died in.
                await wait_state(agent, "dies", "ready", "degraded")
                assert alive(helpers[1])
            assert await wait_gone(helpers[1])
    finally:
        for pid in helpers:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
