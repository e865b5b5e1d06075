"""Running ``mcpd auth`` as a person does, against a daemon whose server wants a login."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import make_config
from tests.support.oauth.protected_mcp import ProtectedMcp

LIMIT = 30


ROOT = Path(__file__).resolve().parents[3]


def config_for(tmp: Path, srv: ProtectedMcp, **daemon: Any) -> Any:
    servers = {"t": {"url": srv.mcp_url}, "notes": {"command": sys.executable, "args": ["-V"]}}
    return make_config(tmp, servers, state_dir=str(tmp / "state"), **daemon)


async def read_until(stream: trio.abc.ReceiveStream, needle: bytes, seen: bytearray) -> None:
    while needle not in seen:
        chunk = await stream.receive_some(4096)
        if not chunk:
            raise AssertionError(f"the command ended without printing {needle!r}:\n{seen!r}")
        seen += chunk


async def mcpd(socket: str, *argv: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = await trio.run_process(
        [sys.executable, "-m", "mcpd", *argv, "--socket", socket],
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
    )
    return proc.returncode, (proc.stdout + proc.stderr).decode()
