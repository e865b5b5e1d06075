"""bubblewrap for the test run: installed with apt when it is missing and the tests run
as root (as the real-systemd tests install systemd-container), so that every server
the tests start runs in the sandbox a user's would; elsewhere the tests that need it
skip with the reason, unless MCPD_REQUIRE_SANDBOX_TESTS=1 (set by `make test` as root)
makes that a failure."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.system import required
from transports.stdio.sandbox import host


def ensure() -> None:
    """Install the bubblewrap package when missing and possible; probe again after."""
    if shutil.which("bwrap") or os.geteuid() != 0 or not shutil.which("apt-get"):
        return
    lock = Path(os.environ.get("MCPD_TEST_CACHE") or Path.home() / ".cache" / "mcpd-tests")
    lock.mkdir(parents=True, exist_ok=True)
    with open(lock / "apt.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        if shutil.which("bwrap"):
            return
        print("installing bubblewrap with apt-get", file=sys.stderr, flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "bubblewrap"]):
            done = subprocess.run(
                cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600
            )
            if done.returncode != 0:
                print(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
                return
    host._machine.clear()  # probe again, now that it is installed


def require() -> None:
    """Skip (or fail, where required) the calling test when this machine cannot run a
    server in a sandbox."""
    machine = host.probe(network=True)
    why = None
    if machine.bwrap is None:
        why = "bubblewrap (bwrap) is not installed (as root, the tests install it with apt)"
    elif machine.namespaces is not None:
        why = f"namespaces are not available here: {machine.namespaces}"
    elif machine.network is not None:
        why = f"a network namespace is not available here: {machine.network}"
    if why is not None:
        required.impossible("sandbox tests", required.SANDBOX, why)
