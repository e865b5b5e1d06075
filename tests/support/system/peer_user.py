"""Another local user, for the tests of who may connect to mcpd: the user (made once),
a folder it can reach, and a way to run a probe as that user."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio

USER = "mcpd-test-peer"

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("useradd"), reason="needs root to create a test user"
)

# Sends one request (argv[2] is the method) and prints the first line that comes back.
ONE_REQUEST = """
import contextlib, json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
req = {"jsonrpc": "2.0", "id": 1, "method": sys.argv[2], "params": {"_meta": meta}}
with contextlib.suppress(BrokenPipeError, ConnectionResetError):
    s.sendall(json.dumps(req).encode() + bytes([10]))
print(s.recv(65536).decode().splitlines()[0])
"""


def peer_uid() -> int:
    """The test user's uid, creating the user the first time."""
    if subprocess.run(["id", USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", USER], check=True)
    return pwd.getpwnam(USER).pw_uid


def shared_dir() -> Path:
    """A fresh folder the test user can reach (pytest's own temp root is root's alone)."""
    shared = Path(tempfile.mkdtemp(prefix="mcpd-peer-"))
    shared.chmod(0o755)
    return shared


def socket_open_to(uid: int, shared: Path) -> dict[str, Any]:
    """The daemon's keys that put its socket in ``shared`` (from ``shared_dir``) and let
    the user ``uid`` in: what a test of another local user's agent configures."""
    return {"socket": str(shared / "mcpd.sock"), "socket_mode": "0666", "allow_uids": [uid]}


async def run_as(uid: int, script: str, *args: str) -> bytes:
    """Run ``script`` with Python as ``uid``; its stdout."""
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    out = await trio.run_process(
        [python, "-c", script, *args],
        capture_stdout=True,
        preexec_fn=lambda: (os.setgid(uid), os.setuid(uid)),
    )
    return out.stdout


async def start_as(uid: int, script: str, *args: str, stdin: bool = False) -> trio.Process:
    """Start ``script`` with Python as ``uid``, its stdout a pipe (and its stdin, with
    ``stdin``, for the test to say when it may go on); the caller stops it."""
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    return await trio.lowlevel.open_process(
        [python, "-c", script, *args],
        stdin=subprocess.PIPE if stdin else None,
        stdout=subprocess.PIPE,
        preexec_fn=lambda: (os.setgid(uid), os.setuid(uid)),
    )
