"""One daemon for each state directory: a second ``mcpd serve`` on the same one stops
(exit 78) naming the directory and the first one's pid, and starts once the first is
gone, however it ended. With the lock held, what writers that died left there as
temporary files is removed at start, and the journal says how many bytes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.daemons.as_operator import MCPD, start, stop


def config(tmp_path: Path, name: str, state: Path) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'[daemon]\nstate_dir = "{state}"\n')
    return path


def serve_refused(path: Path, sock: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPD, "serve", "--config", str(path), "--socket", str(sock), "--log", "stderr"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_second_daemon_on_one_state_directory_stops_naming_the_first(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = start(["--config", str(config(tmp_path, "a", state))], tmp_path / "a.sock")
    try:
        second = serve_refused(config(tmp_path, "b", state), tmp_path / "b.sock")
        assert second.returncode == 78, second.stderr
        assert f"another mcpd (pid {first.pid}) keeps its state in {state}" in second.stderr
        assert "Traceback" not in second.stderr
        assert not (tmp_path / "b.sock").exists()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # Killed: the lock went with it, and the next daemon takes it.
    third = start(["--config", str(config(tmp_path, "c", state))], tmp_path / "c.sock")
    stop(third)


def test_temporary_files_of_dead_writers_are_removed_at_start(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "oauth").mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    gone = subprocess.Popen(["true"])  # its pid: a writer that is gone
    gone.wait()
    left = {
        state / f"pins.json.{gone.pid}.tmp": 3000,
        state / f"registry.json.{gone.pid}.tmp": 500,
        state / "oauth" / f"s.json.{gone.pid}.tmp": 7,
    }
    for path, size in left.items():
        path.write_bytes(b"x" * size)
        path.chmod(0o600)
    # A writer still at work (this test's process), and what is not mcpd's own.
    kept = [
        state / f"token.{os.getpid()}.tmp",
        state / "notes.tmp",
        state / "homes" / f"data.{gone.pid}.tmp",
    ]
    (state / "homes").mkdir(mode=0o700)
    for path in kept:
        path.write_text("kept")
    outside = tmp_path / "outside"
    outside.write_text("not mcpd's")
    link = state / f"pins.json.{gone.pid}9.tmp"
    link.symlink_to(outside)
    sock = tmp_path / "mcpd.sock"
    proc = subprocess.Popen(
        [
            *MCPD,
            "serve",
            "--config",
            str(config(tmp_path, "a", state)),
            "--socket",
            str(sock),
            "--log",
            "stderr",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:
        said.append(line)
        if f"listening on {sock}" in line:
            break
    stop(proc)
    assert f"removed 3 temporary file(s) of 3507 bytes that a stopped mcpd left in {state}" in (
        "".join(said)
    )
    assert not any(path.exists() for path in left)
    assert all(path.exists() for path in kept)
    assert link.is_symlink() and outside.read_text() == "not mcpd's"


def read_only(state: Path, args: list[str]) -> list[str]:
    """``args`` run with ``state`` mounted read-only for it alone (its own mount
    namespace): no lock file can be made there."""
    remount = f'mount --bind "{state}" "{state}" && mount -o remount,bind,ro "{state}" && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", remount, "sh", *args]


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a read-only mount of the state directory needs root and unshare",
)
def test_a_read_only_state_directory_still_takes_one_daemon_only(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)

    def serve(name: str) -> list[str]:
        sock = tmp_path / f"{name}.sock"
        cfg = config(tmp_path, name, state)
        return [*MCPD, "serve", "--config", str(cfg), "--socket", str(sock), "--log", "stderr"]

    first = subprocess.Popen(read_only(state, serve("a")), stderr=subprocess.PIPE, text=True)
    assert first.stderr is not None
    try:
        for line in first.stderr:
            if f"listening on {tmp_path / 'a.sock'}" in line:
                break
        else:
            pytest.fail("the first mcpd exited before it was ready")
        assert not (state / "lock").exists()
        second = subprocess.run(
            read_only(state, serve("b")), capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 78, second.stderr
        assert f"another mcpd (pid unknown) keeps its state in {state}" in second.stderr
        assert not (tmp_path / "b.sock").exists()
        # Nor can one that sees the directory writable, where it could make the file.
        third = serve_refused(config(tmp_path, "c", state), tmp_path / "c.sock")
        assert third.returncode == 78, third.stderr
        assert f"another mcpd (pid unknown) keeps its state in {state}" in third.stderr
        assert not (state / "lock").exists()
    finally:
        stop(first)
