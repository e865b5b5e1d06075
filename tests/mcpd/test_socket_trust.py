"""Another local user cannot stand in for mcpd: the daemon listens only in a directory
nobody else can write."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.support.agent import make_config, running
from tests.support.peer_user import USER, needs_root, peer_uid

MCPD = [sys.executable, "-m", "mcpd"]


def client_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MCPD_CONFIG", "MCPD_SOCKET", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME")
    }
    env["HOME"] = str(tmp / "home")
    env.update(extra)
    return env


async def serve_until_ready_or_gone(tmp: Path, sock: Path) -> tuple[int, str]:
    """Run ``mcpd serve`` on ``sock``; its exit status and what it said, or (-1, ...)
    once it listens (it is then stopped)."""
    cfg = tmp / "empty.toml"
    cfg.write_text(f'[daemon]\nstate_dir = "{tmp / "state"}"\n')
    proc = await trio.lowlevel.open_process(
        [*MCPD, "serve", "--config", str(cfg), "--socket", str(sock), "--log", "stderr"],
        stderr=subprocess.PIPE,
        env=client_env(tmp),
    )
    said = b""
    try:
        assert proc.stderr is not None
        with trio.fail_after(60):
            while f"listening on {sock}; ".encode() not in said:
                chunk = await proc.stderr.receive_some(65536)
                if not chunk:
                    return await proc.wait(), said.decode()
                said += chunk
        return -1, said.decode()
    finally:
        with trio.CancelScope(shield=True):
            proc.terminate()
            await proc.wait()


@needs_root
async def test_serve_refuses_a_socket_directory_another_user_made(tmp_path: Path) -> None:
    # As /tmp/mcpd-UID would be, made by someone else before mcpd first ran.
    squatted = tmp_path / f"mcpd-{os.getuid()}"
    squatted.mkdir(mode=0o700)
    os.chown(squatted, peer_uid(), peer_uid())
    code, said = await serve_until_ready_or_gone(tmp_path, squatted / "mcpd.sock")
    assert code == 78, said
    assert f"the socket directory {squatted} belongs to uid {peer_uid()} ({USER})" in said
    assert not (squatted / "mcpd.sock").exists()


@pytest.mark.parametrize("above", [False, True])
async def test_serve_refuses_a_socket_directory_others_may_write(
    tmp_path: Path, above: bool
) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    sock = open_dir / "mcpd" / "mcpd.sock" if above else open_dir / "mcpd.sock"
    code, said = await serve_until_ready_or_gone(tmp_path, sock)
    assert code == 78, said
    what = "a directory above the socket" if above else "the socket directory"
    assert f"{what} {open_dir} is writable by others (mode 0777)" in said
    assert not sock.exists()


async def test_a_missing_socket_directory_is_made_private(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {}, socket=str(tmp_path / "run" / "mcpd.sock"))
    with trio.fail_after(30):
        async with running(cfg):
            mode = stat.S_IMODE((tmp_path / "run").stat().st_mode)
    assert mode == 0o700, oct(mode)
