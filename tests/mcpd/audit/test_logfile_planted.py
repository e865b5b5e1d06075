"""A file another user put under the audit log's names, while the state directory was
open to them (mcpd refuses such a directory until it is made `chmod go-w`, and then
runs), gets no record: the running daemon says which file, whose and what it is, counts
a write error, serves on and stops when told; a FIFO there holds neither the writer nor
the stop; and ``mcpd calls`` reads the log's other files, names the ones it will not
read, and does not wait on a FIFO."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from mcpd.audit.log import FILE_NAME, AuditLog
from mcpd.audit.record import CallRecord
from mcpd.config.tables.model import DaemonConfig
from mcpd.policy.agent import AgentInfo
from tests.support.clients.agent import META, connect
from tests.support.system.peer_user import USER, needs_root, peer_uid, run_as, shared_dir
from tests.support.system.procs import scripted

pytestmark = [needs_root, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[3]
LIMIT = 60
FORGED = b'{"time":"2026-01-01T00:00:00Z","ts":1767225600.0,"method":"tools/call","forged":1}\n'
# Puts a file (argv[2] "file": with argv[3] in hex, mode 0666) or a FIFO (0666) at argv[1].
PLANT = """
import os, sys
os.umask(0)
path, kind = sys.argv[1], sys.argv[2]
if kind == "fifo":
    os.mkfifo(path, 0o666)
else:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    os.write(fd, bytes.fromhex(sys.argv[3]))
    os.close(fd)
"""


@pytest.fixture
def state() -> Iterator[Path]:
    """A state directory once open to every user, since made `chmod go-w`."""
    shared = shared_dir()
    directory = shared / "state"
    directory.mkdir()
    directory.chmod(0o777)
    try:
        yield directory
    finally:
        shutil.rmtree(shared, ignore_errors=True)


async def plant(path: Path, kind: str, data: bytes = b"") -> None:
    await run_as(peer_uid(), PLANT, str(path), kind, data.hex())
    assert path.lstat().st_uid == peer_uid()


class Serving:
    """``mcpd serve`` as a process, and what it said on stderr."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.said = ""

    async def until(self, text: str) -> None:
        assert self.proc.stderr is not None
        while text not in self.said:
            chunk = await self.proc.stderr.receive_some(65536)
            assert chunk, self.said
            self.said += chunk.decode(errors="replace")

    async def stop(self) -> int:
        """SIGTERM, and its exit status once it has exited (and said all it had)."""
        assert self.proc.stderr is not None
        self.proc.send_signal(signal.SIGTERM)
        while chunk := await self.proc.stderr.receive_some(65536):
            self.said += chunk.decode(errors="replace")
        return await self.proc.wait()


def write_config(tmp_path: Path, state: Path) -> Path:
    command, args = scripted("--names", "note")
    config = tmp_path / "config.toml"
    config.write_text(
        "[daemon]\n"
        f"socket = {json.dumps(str(tmp_path / 'mcpd.sock'))}\n"
        f"state_dir = {json.dumps(str(state))}\n"
        "audit_journal = false\naudit_arguments = true\n"
        f"[servers.notes]\ncommand = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"
    )
    return config


@asynccontextmanager
async def serving(config: Path) -> AsyncIterator[Serving]:
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "mcpd", "serve", "--config", str(config), "--log", "stderr"],
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        daemon = Serving(proc)
        await daemon.until("listening on")
        yield daemon
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()


async def call_notes(sock: Path, calls: int, size: int = 10) -> None:
    async with connect(str(sock)) as agent:
        for _ in range(calls):
            params = {"name": "mcp__notes__note", "arguments": {"text": "x" * size}, "_meta": META}
            reply = await agent.rpc("tools/call", params)
            assert "result" in reply, reply


def refused(path: Path, what: str) -> str:
    return f"cannot write the audit log {path}: {path} {what}"


async def test_another_users_file_under_the_logs_name_gets_no_record(
    tmp_path: Path, state: Path
) -> None:
    planted = state / FILE_NAME
    await plant(planted, "file", FORGED)
    state.chmod(0o755)  # as mcpd asks of it
    config = write_config(tmp_path, state)
    with trio.fail_after(LIMIT):
        async with serving(config) as daemon:
            await call_notes(tmp_path / "mcpd.sock", 3)
            assert await daemon.stop() == 0, daemon.said
    assert planted.read_bytes() == FORGED
    owner = f"belongs to uid {peer_uid()} ({USER}), not to root or the mcpd service user"
    assert refused(planted, owner) in daemon.said
    assert "mcpd writes no record to it until it is removed" in daemon.said
    code, out, err = await trio.to_thread.run_sync(mcpd_calls, config)
    assert code == 1, err  # the log was not read whole
    assert "forged" not in out
    assert f"mcpd: {planted} {owner}, so mcpd does not trust what it says; not read" in err


async def test_a_fifo_under_the_logs_name_holds_neither_the_writer_nor_the_stop(
    tmp_path: Path, state: Path
) -> None:
    planted = state / FILE_NAME
    await plant(planted, "fifo")
    state.chmod(0o755)
    config = write_config(tmp_path, state)
    with trio.fail_after(LIMIT):
        async with serving(config) as daemon:
            # More than a pipe holds: a writer that wrote into the FIFO would wait forever.
            await call_notes(tmp_path / "mcpd.sock", 4, size=40_000)
            assert await daemon.stop() == 0, daemon.said
    fifo = f"is not a regular file (a FIFO of uid {peer_uid()}, {USER})"
    assert refused(planted, fifo) in daemon.said


def mcpd_calls(config: Path) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "mcpd", "calls", "--config", str(config), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "MCPD_CONFIG"},
        timeout=LIMIT,
    )
    return proc.returncode, proc.stdout, proc.stderr


async def test_mcpd_calls_reads_the_logs_own_files_and_names_the_others(
    tmp_path: Path, state: Path
) -> None:
    await plant(state / f"{FILE_NAME}.3", "fifo")
    await plant(state / f"{FILE_NAME}.2", "file", FORGED)
    state.chmod(0o755)
    agent = AgentInfo(uid=0, pid=7, exe="a", profile="default", connection="c", era="modern")
    log = AuditLog(str(state), DaemonConfig(audit_journal=False))
    mine = CallRecord(
        ts=1.0, agent=agent, method="tools/call", name="mcp__notes__mine", outcome="ok"
    )
    log.record(mine)
    await log.flush()
    log._close()
    config = tmp_path / "config.toml"
    config.write_text(f'[daemon]\nstate_dir = "{state}"\n')
    code, out, err = await trio.to_thread.run_sync(mcpd_calls, config)
    assert code == 1, err
    assert [json.loads(line)["name"] for line in out.splitlines()] == ["mcp__notes__mine"]
    fifo, forged = state / f"{FILE_NAME}.3", state / f"{FILE_NAME}.2"
    assert f"mcpd: {fifo} is not a regular file (a FIFO of uid {peer_uid()}, {USER}); " in err
    assert f"mcpd: {forged} belongs to uid {peer_uid()} ({USER}), not to root or the " in err


async def test_a_hard_link_under_the_logs_name_gets_no_record_nor_a_new_mode(
    tmp_path: Path,
) -> None:
    # A root daemon's own state directory, with a second name of another file in it: the
    # file is root's and nobody else can write it, but what goes to it is not the log.
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "accounts"
    target.write_bytes(b"root:x:0:0::/root:/bin/sh\n")
    target.chmod(0o644)
    os.link(target, state / FILE_NAME)
    config = write_config(tmp_path, state)
    with trio.fail_after(LIMIT):
        async with serving(config) as daemon:
            await call_notes(tmp_path / "mcpd.sock", 3)
            assert await daemon.stop() == 0, daemon.said
    assert target.read_bytes() == b"root:x:0:0::/root:/bin/sh\n"
    assert target.stat().st_mode & 0o777 == 0o644
    linked = "has 2 hard links, so it is not a file mcpd keeps for itself"
    assert refused(state / FILE_NAME, linked) in daemon.said
