"""A hostile server of a root mcpd goes for the pids cgroups that hold it to its process
limit: its own (to lift the limit), mcpd's above it (to cap every other server), by
the cgroup tree every process sees under ``/sys/fs/cgroup`` and by a cgroup
filesystem it would mount itself in namespaces of its own making. Each sandboxed level
refuses, and the limit holds; without a sandbox the same write goes through, which
shows what the sandbox stopped. The writes put back the value they read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    RUNTIME,
    agent_of,
    hostile,
    pids_max,
    serving,
    steady,
    text,
    untouched,
    wait_ready,
)
from transports.stdio.sandbox import host

pytestmark = pytest.mark.timeout(120)

LIMIT = 24


@pytest.fixture(autouse=True)
def _pids_cgroups_work() -> None:
    if os.geteuid() != 0:
        pytest.skip("only a root mcpd holds its servers to a pids cgroup")
    if not host.probe().pids_cgroup:
        pytest.skip("no pids cgroup can be made here")


async def test_a_root_mcpds_sandboxed_servers_cannot_change_their_pids_cgroups(
    tmp_path: Path,
) -> None:
    limits = {"processes": LIMIT}
    servers = {
        "hostile": hostile(limits=limits),
        "strict": hostile(sandbox="strict", read=RUNTIME, limits=limits),
        "open": hostile(sandbox="off", limits=limits),
        "steady": steady(),
    }
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, *servers)
            before = await d.status()
            assert before["hostile"]["sandbox"]["unprotected"] is None
            own = {alias: pids_max(before[alias]["pid"]) for alias in servers}
            mcpds = own["hostile"].parent.parent / "pids.max"
            assert own["strict"].parent.parent / "pids.max" == mcpds
            values = {path: path.read_text() for path in (*own.values(), mcpds)}
            for alias in ("hostile", "strict"):
                for path in (own[alias], mcpds):
                    got = text(await agent.call(f"mcp__{alias}__rewrite", {"path": str(path)}))
                    assert got.startswith("refused: "), (alias, path, got)
                    if alias == "hostile":  # strict shows no /sys at all
                        assert "Read-only file system" in got, got
                arguments = {"name": "pids.max"}
                got = text(await agent.call(f"mcp__{alias}__own_cgroup_afresh", arguments))
                assert got.startswith("refused: "), (alias, got)
                # Its limit holds: forking past it fails inside the server.
                got = text(await agent.call(f"mcp__{alias}__fork_many", {"count": 2 * LIMIT}))
                assert got.startswith("refused: BlockingIOError"), (alias, got)
                assert int(got.rsplit("after ", 1)[1].split()[0]) < LIMIT, got
            got = text(await agent.call("mcp__open__rewrite", {"path": str(own["open"])}))
            assert got == f"ok: rewrote {own['open']}", got
            await untouched(d, agent, before)
            assert {path: path.read_text() for path in values} == values
