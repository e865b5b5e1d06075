"""A daemon started and stopped as an operator does, and a client of its socket."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

MCPD = [sys.executable, "-m", "mcpd"]


def mcpd(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MCPD, *args], capture_output=True, text=True, timeout=timeout)


def start(
    args: list[str], sock: Path, preexec: Callable[[], None] | None = None
) -> subprocess.Popen[str]:
    """``preexec``: run in the daemon's process before mcpd (to set its limits, say)."""
    proc = subprocess.Popen(
        [*MCPD, "serve", *args, "--socket", str(sock), "--log", "stderr"],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # the daemon says when it listens and is ready
        if f"listening on {sock}" in line:
            return proc
    proc.wait()
    pytest.fail("mcpd serve exited before it was ready")


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def client(sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return mcpd(*args, "--socket", str(sock))
