"""A sandboxed server's life with mcpd: it dies with mcpd, also when mcpd is killed, and
when mcpd stops it, its own process hears SIGTERM and may finish what it does."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import HOSTILE, agent_of, hostile, serving, steady, wait_ready
from tests.support.system.procs import wait_gone

pytestmark = pytest.mark.timeout(120)


async def test_a_killed_mcpd_takes_its_sandboxed_servers_along(tmp_path: Path) -> None:
    with serving(tmp_path, {"hostile": hostile(), "steady": steady()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            rows = await d.status()
        pids = [rows[a]["pid"] for a in ("hostile", "steady")]
        assert all(isinstance(p, int) and p != d.pid for p in pids), pids
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(timeout=10)
        for pid in pids:
            assert await wait_gone(pid, timeout=10), f"server {pid} outlived a killed mcpd"


async def test_a_stopped_server_hears_sigterm_in_its_sandbox(tmp_path: Path) -> None:
    state = tmp_path / "state"
    mark = state / "homes" / "graceful" / "terminated"
    graceful = {"command": sys.executable, "args": [HOSTILE, "--on-term", str(mark)]}
    with serving(tmp_path, {"graceful": graceful, "steady": steady()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "graceful", "steady")
        d.proc.send_signal(signal.SIGTERM)
        assert d.proc.wait(timeout=60) == 0
    assert mark.read_text() == "terminated"
    assert "sending SIGKILL" not in d.log()
