"""A socket file another user left in a sticky directory, where mcpd is to listen, is not
mcpd's to remove (nor can it tell whether it listens): ``mcpd serve`` exits 78 naming
the file and its owner, and a reload that would listen there is refused whole, by
``mcpd reload`` (exit 78) as by a SIGHUP (said in the journal), the daemon serving on.

The daemon runs as root without capabilities: file modes then hold it as they hold any
other user, and the file's owner is the test user."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from tests.support.clients.agent import connect
from tests.support.system.peer_user import USER, needs_root, peer_uid, run_as, shared_dir
from tests.support.system.procs import SCRIPTED

pytestmark = [
    needs_root,
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv"),
    pytest.mark.timeout(90),
]

MCPD = [sys.executable, "-m", "mcpd"]
# What an ordinary user is: no capability to pass over a file's mode.
UNPRIVILEGED = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]
LEAVE_SOCKET = "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])"


class Said:
    """What a daemon wrote to stderr, read as far as asked."""

    def __init__(self, proc: trio.Process) -> None:
        assert proc.stderr is not None
        self._stream = proc.stderr
        self.text = ""

    async def until(self, text: str, start: int = 0) -> bool:
        """True once ``text`` was said (after offset ``start``); False at its end."""
        with trio.fail_after(60):
            while text not in self.text[start:]:
                chunk = await self._stream.receive_some(65536)
                if not chunk:
                    return False
                self.text += chunk.decode(errors="replace")
        return True


def config(tmp_path: Path, profile_socket: Path | None) -> str:
    text = (
        f'[daemon]\nsocket = "{tmp_path / "mcpd.sock"}"\nstate_dir = "{tmp_path / "state"}"\n'
        f'[servers.a]\ncommand = "{sys.executable}"\nargs = ["{SCRIPTED}", "--tools", "1"]\n'
        'sandbox = "off"\n'
    )
    if profile_socket is not None:
        text += f'[profiles.dev]\nservers = ["a"]\nsocket = "{profile_socket}"\n'
    return text


@pytest.fixture
async def left_behind() -> AsyncIterator[Path]:
    """A socket file of the test user's in a sticky directory, nobody listening on it."""
    shared = shared_dir()
    sticky = shared / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    path = sticky / "dev.sock"
    try:
        await run_as(peer_uid(), LEAVE_SOCKET, str(path))
        assert path.lstat().st_uid == peer_uid()
        yield path
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@asynccontextmanager
async def serving(cfg: Path, *flags: str) -> AsyncIterator[tuple[trio.Process, Said]]:
    proc = await trio.lowlevel.open_process(
        [*UNPRIVILEGED, *MCPD, "serve", "--config", str(cfg), "--log", "stderr", *flags],
        stderr=subprocess.PIPE,
    )
    try:
        yield proc, Said(proc)
    finally:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.terminate()
            await proc.wait()


def refusal(path: Path) -> str:
    return (
        f"the socket file {path} belongs to uid {peer_uid()} ({USER}), not to root (mcpd "
        "may not connect to it, mode 0755): mcpd does not remove another user's file (in "
        f"the sticky directory {path.parent} only its owner or root may remove it); have "
        "its owner or root remove it, or choose another socket path"
    )


@pytest.mark.parametrize("where", ["--socket", "profile"])
async def test_serve_will_not_listen_there(tmp_path: Path, left_behind: Path, where: str) -> None:
    cfg = tmp_path / "mcpd.toml"
    cfg.write_text(config(tmp_path, left_behind if where == "profile" else None))
    flags = ["--socket", str(left_behind)] if where == "--socket" else []
    async with serving(cfg, *flags) as (proc, said):
        assert not await said.until("listening on ")
        assert await proc.wait() == 78, said.text
    key = "profiles.dev.socket: " if where == "profile" else ""
    assert f"ERROR    {key}{refusal(left_behind)}" in said.text
    assert "Traceback" not in said.text
    assert left_behind.lstat().st_uid == peer_uid()


async def test_a_reload_that_would_listen_there_is_refused_and_the_daemon_serves_on(
    tmp_path: Path, left_behind: Path
) -> None:
    cfg = tmp_path / "mcpd.toml"
    cfg.write_text(config(tmp_path, None))
    sock = str(tmp_path / "mcpd.sock")
    async with serving(cfg) as (proc, said):
        assert await said.until(f"listening on {sock}; "), said.text
        cfg.write_text(config(tmp_path, left_behind))
        rejected = "reload rejected, keeping the running configuration: profiles.dev.socket: "
        reload = await trio.run_process(
            [*MCPD, "reload", "--socket", sock], capture_stderr=True, check=False
        )
        assert reload.returncode == 78, reload.stderr
        assert refusal(left_behind) in reload.stderr.decode()
        assert await said.until(rejected + refusal(left_behind)), said.text
        mark = len(said.text)
        proc.send_signal(signal.SIGHUP)
        assert await said.until(rejected + refusal(left_behind), mark), said.text
        async with connect(sock) as agent:
            assert [t["name"] for t in await agent.tools()] == ["mcp__a__tool0"]
        proc.terminate()
        assert await proc.wait() == 0, said.text
    assert "Traceback" not in said.text
    assert os.path.exists(left_behind) and left_behind.lstat().st_uid == peer_uid()


PLANTS = {
    "fifo": ("a FIFO", 0o644),
    "directory": ("a directory", 0o755),
    "symlink": ("a symbolic link", 0o777),
    "file": ("a regular file", 0o644),
    "live socket": ("a socket", 0o777),  # one mcpd may connect to
}


@pytest.mark.parametrize("kind", list(PLANTS))
@pytest.mark.parametrize("where", ["--socket", "profile"])
async def test_another_users_anything_at_the_path_stops_serve_as_a_config_error(
    tmp_path: Path, kind: str, where: str
) -> None:
    path = tmp_path / "there.sock"
    listening = None
    if kind == "fifo":
        os.mkfifo(path, 0o644)
    elif kind == "directory":
        path.mkdir(mode=0o755)
    elif kind == "symlink":
        path.symlink_to(tmp_path / "elsewhere")
    elif kind == "file":
        path.write_text("theirs")
    else:
        listening = socket.socket(socket.AF_UNIX)
        listening.bind(str(path))
        listening.listen(1)
    if kind != "symlink":  # a link's own mode is always 0777
        os.chmod(path, PLANTS[kind][1])
    os.lchown(path, peer_uid(), peer_uid())
    cfg = tmp_path / "mcpd.toml"
    cfg.write_text(config(tmp_path, path if where == "profile" else None))
    flags = ["--socket", str(path)] if where == "--socket" else []
    try:
        async with serving(cfg, *flags) as (proc, said):
            assert not await said.until("listening on ")
            assert await proc.wait() == 78, said.text
    finally:
        if listening is not None:
            listening.close()
    what, mode = PLANTS[kind]
    assert f"{what} of uid {peer_uid()} ({USER}), mode {mode:04o}" in said.text
    assert str(path) in said.text
    assert "Traceback" not in said.text
    assert path.lstat().st_uid == peer_uid()
