"""An ``mcpd`` command run against a daemon's socket, its output checked to be a success:
run as a person runs it, at a terminal of their own (``APART``), so that a test whose
agents it started (their host, as mcpd sees it) still decides."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trio

from tests.support.cli.apart import APART

ROOT = Path(__file__).resolve().parents[3]


async def mcpd(socket: Path, *argv: str) -> str:
    proc = await trio.run_process(
        [*APART, sys.executable, "-m", "mcpd", *argv, "--socket", str(socket)],
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=ROOT,
    )
    out = (proc.stdout + proc.stderr).decode()
    assert proc.returncode == 0, out
    return out
