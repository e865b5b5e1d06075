"""On a machine where user namespaces are off, a server at the default level runs
unprotected and mcpd says so, with bubblewrap's reason, in its status, its journal and
check-config; a strict server does not start, and its outage says what is missing.
The machine is made here: mcpd runs in a user namespace of its own whose limit on
further user namespaces is 0."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    HOSTILE,
    RUNTIME,
    agent_of,
    hostile,
    serving,
    steady,
    text,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)

# Runs the rest of its command line where no more user namespaces may be made.
NO_USERNS = (
    "unshare",
    "--user",
    "--map-root-user",
    "sh",
    "-c",
    'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"',
    "sh",
)
REASON = "namespaces are not available"


@pytest.fixture(autouse=True)
def _unshare_installed() -> None:
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is missing")


async def test_the_default_level_runs_unprotected_and_says_why(tmp_path: Path) -> None:
    servers = {
        "hostile": hostile(),
        "steady": steady(),
        "strict": hostile(sandbox="strict", read=RUNTIME),
    }
    with serving(tmp_path, servers, wrap=NO_USERNS) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            rows = await d.status()
            for alias in ("hostile", "steady"):
                unprotected = rows[alias]["sandbox"]["unprotected"]
                assert unprotected.startswith(f"no sandbox: {REASON} ("), unprotected
                assert "Creating new namespace failed" in unprotected
            # It runs, unprotected: what the sandbox would have hidden is in its reach.
            got = text(
                await agent.call(
                    "mcp__hostile__read_file", {"path": str(tmp_path / "state" / "token")}
                )
            )
            assert got.startswith("ok: "), got
            # The strict one does not start at all, and says why.
            assert rows["strict"]["state"] not in ("ready", "degraded")
            assert (
                'servers.strict.sandbox = "strict" cannot be applied'
                in rows["strict"]["last_error"]
            )
            log = d.log()
            assert "[hostile] unprotected: runs without part of its sandbox: no sandbox:" in log
            status = subprocess.run(
                [sys.executable, "-m", "mcpd", "status", "--socket", d.socket],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert f"unprotected| no sandbox: {REASON}" in status.stdout, status.stdout


def test_check_config_says_a_server_would_run_unprotected(tmp_path: Path) -> None:
    config = tmp_path / "mcpd.toml"
    config.write_text(
        f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n'
        f"[servers.plain]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(HOSTILE)}]\n"
    )
    checked = subprocess.run(
        [*NO_USERNS, sys.executable, "-m", "mcpd", "check-config", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr
    assert f"unprotected: no sandbox: {REASON}" in checked.stdout, checked.stdout
    # Where namespaces work, the same config is not said to be unprotected.
    plain = subprocess.run(
        [sys.executable, "-m", "mcpd", "check-config", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "unprotected" not in plain.stdout, plain.stdout
