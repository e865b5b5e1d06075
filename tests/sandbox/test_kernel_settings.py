"""A hostile server of a root mcpd tries to change the kernel's settings (``/proc/sys``,
``/sys``), through which a process inside a sandbox reaches everything outside it: a
``kernel.core_pattern`` of its choosing runs its program as root, in no namespace,
at the next crash anywhere. Each sandboxed level refuses; without a sandbox the same
write goes through, which shows what the sandbox stopped. The writes put back the
value they read, so the machine is left as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    RUNTIME,
    agent_of,
    hostile,
    serving,
    steady,
    text,
    untouched,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)

# A setting of /proc/sys, and one of /sys (which a strict sandbox does not show).
SETTINGS = ("/proc/sys/fs/lease-break-time", "/sys/kernel/rcu_expedited")


@pytest.fixture(autouse=True)
def _runs_as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("only root may write the kernel's settings, sandbox or not")


async def test_a_root_mcpds_sandboxed_servers_cannot_change_kernel_settings(
    tmp_path: Path,
) -> None:
    servers = {
        "hostile": hostile(sandbox="strict", read=RUNTIME),
        "plain": hostile(),
        "open": hostile(sandbox="off"),
        "steady": steady(),
    }
    values = {setting: Path(setting).read_text() for setting in SETTINGS}
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, *servers)
            before = await d.status()
            assert before["hostile"]["sandbox"]["level"] == "strict"
            for setting in SETTINGS:
                for alias in ("hostile", "plain"):
                    arguments = {"path": setting}
                    got = text(await agent.call(f"mcp__{alias}__rewrite", arguments))
                    if alias == "hostile" and setting.startswith("/sys/"):
                        assert got.startswith("refused: FileNotFoundError"), (alias, got)
                        continue
                    assert got.startswith("refused: OSError"), (alias, setting, got)
                    assert "Read-only file system" in got, (alias, setting, got)
                got = text(await agent.call("mcp__open__rewrite", {"path": setting}))
                assert got == f"ok: rewrote {setting}", got
            await untouched(d, agent, before)
    assert {setting: Path(setting).read_text() for setting in SETTINGS} == values
