"""An ``mcpd`` command run against a daemon's socket, its output checked to be a success."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[2]


async def mcpd(socket: Path, *argv: str) -> str:
    proc = await trio.run_process(
        [sys.executable, "-m", "mcpd", *argv, "--socket", str(socket)],
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=ROOT,
    )
    out = (proc.stdout + proc.stderr).decode()
    assert proc.returncode == 0, out
    return out
