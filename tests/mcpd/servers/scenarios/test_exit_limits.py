"""Which limit a server that died is said to have reached, in the call result, its
``_meta`` and status: only one the kernel reports, or one its final error on stderr
names (said as the server's word); never one whose words only appear in its log
before an unrelated error, and never a signal a sandboxed status merely looks like."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.supervision import server, text, wait_state
from tests.support.system import bubblewrap
from transports.stdio.process import pidgroup


def dies_saying(*lines: str, status: int = 1, **settings: Any) -> dict[str, Any]:
    """A server that writes ``lines`` on stderr and exits with ``status`` when called."""
    flags = ("--die-on-call", "--die-saying", "\n".join(lines), "--die-status", str(status))
    return {**server(*flags), **settings}


async def said_of(agent: Any, alias: str) -> tuple[str, str, str]:
    """The words of a call it dies of, that result's ``_meta`` reason and the status
    row's last error."""
    await wait_state(agent, alias, "ready")
    result = await agent.call(f"mcp__{alias}__tool0")
    row = await wait_state(agent, alias, "failed")
    return text(result), result["_meta"]["mcpd/outage"]["reason"], row["last_error"]


async def test_words_of_a_limit_in_the_log_before_another_error_blame_no_limit(
    tmp_path: Path,
) -> None:
    servers = {
        "logs": dies_saying(
            "poll: EAGAIN on read, retrying",
            "Traceback (most recent call last):",
            "KeyError: 'config'",
        ),
        "gpu": dies_saying("CUDA out of memory, trying a smaller batch", "ValueError: bad arg"),
        "oom": dies_saying("Traceback (most recent call last):", "MemoryError"),
    }
    cfg = make_config(tmp_path, servers, backoff_base=30.0, backoff_cap=60.0)
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            for alias in ("logs", "gpu"):
                for said in await said_of(agent, alias):
                    assert "exited with status 1" in said, said
                    assert "limit" not in said, said
            # A final error that names a limit is quoted as the server's word for it.
            for said in await said_of(agent, "oom"):
                assert (
                    "exited with status 1: its last error on stderr says it reached its "
                    "limit daemon.limits.memory = 4 GiB"
                ) in said, said


async def test_a_sandboxed_status_that_looks_like_sigxcpu_is_said_as_a_status(
    tmp_path: Path,
) -> None:
    bubblewrap.require()
    servers = {"b": dies_saying(status=128 + 24, limits={"cpu": 600})}
    cfg = make_config(tmp_path, servers, backoff_base=30.0, backoff_cap=60.0)
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            for said in await said_of(agent, "b"):
                assert "exited with status 152 (as a process killed by SIGXCPU would)" in said
                assert "limit" not in said and "was killed" not in said, said


@pytest.mark.parametrize("sandbox", ["off", "default"])
async def test_a_fork_its_pids_cgroup_refused_names_the_process_limit(
    tmp_path: Path, sandbox: str
) -> None:
    if os.geteuid() != 0:
        pytest.skip("a pids cgroup of a server's own is made only by a root mcpd")
    if pidgroup.base() is None:
        pytest.skip(
            "no pids cgroup hierarchy mcpd may write here (cgroup v1 pids, or v2 at its root)"
        )
    if sandbox != "off":
        bubblewrap.require()
    # Its last words say nothing of a limit.
    fork = dies_saying("KeyError: 'config'", sandbox=sandbox, limits={"processes": 8})
    fork["args"].append("--fork-until-refused")
    servers = {"f": fork}
    cfg = make_config(tmp_path, servers, backoff_base=30.0, backoff_cap=60.0)
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            for said in await said_of(agent, "f"):
                # Its last words say nothing of it; the kernel's count does.
                assert (
                    "exited with status 1: it reached its limit servers.f.limits.processes = 8"
                    in said
                ), said
