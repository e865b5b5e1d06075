"""A ``${file:PATH}`` larger than any secret (a CA bundle or a log named by mistake) is
an error in the config: ``check-config`` says so, the daemon does not start with it,
and a reload with it is refused while the config in force keeps serving. The error
names the key, the file, its size and the bound, never what the file holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.credentials.secrets import SECRET_FILE_LIMIT, read_secret
from mcpd.config.loading.load import load
from mcpd.config.tables.model import ConfigError
from tests.support.clients.agent import Agent, connect, running
from tests.support.system.procs import scripted

ROOT = Path(__file__).resolve().parents[4]
KEY = "servers.remote.headers.Authorization"


def secret_file(tmp_path: Path, size: int) -> Path:
    path = tmp_path / "token"
    path.write_bytes(b"Zq9x" * (size // 4) + b"Zq9x"[: size % 4])
    path.chmod(0o600)
    return path


def write_config(path: Path, token: Path | None) -> None:
    command, args = scripted()
    text = (
        f'[daemon]\nsocket = "{path.parent / "mcpd.sock"}"\nbackoff_base = 0.05\n'
        f"\n[servers.local]\ncommand = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"
    )
    if token is not None:
        text += (
            '\n[servers.remote]\nurl = "https://mcp.example.com/mcp"\n'
            f'headers = {{ Authorization = "Bearer ${{file:{token}}}" }}\n'
        )
    path.write_text(text)


async def answer(agent: Agent) -> str:
    result = await agent.call("mcp__local__tool0", {"text": "now"})
    return str(result["content"][0]["text"])


def said(tmp_path: Path, size: int) -> str:
    return (
        f"{KEY}: secret file {str(tmp_path / 'token')!r} holds {size} bytes, more than a "
        f"secret may ({SECRET_FILE_LIMIT} bytes): is it the right file?"
    )


def test_a_secret_file_as_large_as_the_bound_is_read(tmp_path: Path) -> None:
    assert len(read_secret(str(secret_file(tmp_path, SECRET_FILE_LIMIT)), {})) == (
        SECRET_FILE_LIMIT
    )


@pytest.mark.parametrize("size", [SECRET_FILE_LIMIT + 1, 3_000_000])
def test_a_config_with_a_larger_secret_file_does_not_load(tmp_path: Path, size: int) -> None:
    path = tmp_path / "mcpd.toml"
    write_config(path, secret_file(tmp_path, size))
    with pytest.raises(ConfigError) as info:
        load(path)
    assert str(info.value) == f"{path}: {said(tmp_path, size)}"


def test_check_config_says_which_secret_file_is_too_large(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.toml"
    write_config(path, secret_file(tmp_path, 200_000))
    proc = subprocess.run(
        [sys.executable, "-m", "mcpd", "check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert proc.returncode == 78
    assert said(tmp_path, 200_000) in proc.stderr
    assert "Zq9x" not in proc.stdout + proc.stderr


async def test_a_reload_with_a_too_large_secret_file_is_refused_while_calls_go_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcpd.toml"
    write_config(path, None)
    size = 1_000_000
    replies: dict[str, Any] = {}
    with trio.fail_after(60):
        async with (
            running(load(path), str(path)) as daemon,
            connect(str(tmp_path / "mcpd.sock")) as operator,
            connect(str(tmp_path / "mcpd.sock")) as agent,
        ):
            assert await answer(agent) == "tool0:now"
            write_config(path, secret_file(tmp_path, size))

            async def reload() -> None:
                replies["reload"] = await operator.rpc("mcpd/reload")

            async def call() -> None:
                replies["call"] = await answer(agent)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(reload)
                nursery.start_soon(call)
            assert sorted(daemon.supervisor.servers) == ["local"]
            # Still serving after it, under the config in force.
            assert await answer(agent) == "tool0:now"
    assert replies["call"] == "tool0:now"
    error = replies["reload"]["error"]
    assert said(tmp_path, size) in error["message"]
    assert "Zq9x" not in json.dumps(replies)
