"""A ``${VAR}`` whose value is larger than a secret file may be is an error in the
config, as such a file is: ``check-config`` names the key, the variable, its size and
the bound, never the value."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcpd.config.loading.expand import VALUE_LIMIT

ROOT = Path(__file__).resolve().parents[4]


def write_config(path: Path) -> None:
    path.write_text(
        f'[daemon]\nsocket = "{path.parent / "mcpd.sock"}"\n'
        '\n[servers.remote]\nurl = "https://mcp.example.com/mcp"\n'
        'headers = { Authorization = "Bearer ${REMOTE_TOKEN}" }\n'
    )


def check_config(path: Path, token: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpd", "check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(ROOT),
            "REMOTE_TOKEN": token,
        },
        timeout=60,
    )


def test_check_config_says_which_variable_is_too_large(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.toml"
    write_config(path)
    size = VALUE_LIMIT + 1
    proc = check_config(path, ("Zq9x" * size)[:size])
    assert proc.returncode == 78
    assert (
        "servers.remote.headers.Authorization: environment variable REMOTE_TOKEN holds "
        f"{size} bytes, more than a value from the environment may ({VALUE_LIMIT} bytes): "
        "is it the right variable?"
    ) in proc.stderr
    assert "Zq9x" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("size", [VALUE_LIMIT, 40])
def test_a_variable_within_the_bound_is_used(tmp_path: Path, size: int) -> None:
    path = tmp_path / "mcpd.toml"
    write_config(path)
    proc = check_config(path, ("Zq9x" * size)[:size])
    assert proc.returncode == 0, proc.stderr
    assert "Zq9x" not in proc.stdout + proc.stderr
