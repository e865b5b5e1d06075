"""Where the third-party peers live (installed by `make peers`), and their commands: a
test that needs one that is not installed skips, naming what installs it."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
NODE_BIN = ROOT / "tests" / "peers" / "node_modules" / ".bin"
V1_PYTHON = ROOT / ".venv-peers-v1" / "bin" / "python"
SERVERS = ROOT / "tests" / "interop" / "servers"


def node_tool(name: str) -> str:
    path = NODE_BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed; run `make peers`")
    return str(path)


def node_env() -> dict[str, str]:
    """PATH with the Node 22 the peers are installed for first."""
    return {"PATH": f"{NODE_BIN}:{os.environ.get('PATH', '')}"}


def v1_python() -> str:
    if not V1_PYTHON.exists():
        pytest.skip("the v1 SDK venv is missing; run `make peers`")
    return str(V1_PYTHON)


def sdk_server_cmd() -> tuple[str, list[str]]:
    return sys.executable, [str(SERVERS / "sdk_server.py"), "stdio"]


def console_script(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed in the test environment")
    return found
