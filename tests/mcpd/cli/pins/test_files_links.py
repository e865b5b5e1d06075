"""The files ``mcpd pins export -o`` writes and ``mcpd pins import`` reads, through a
running daemon: a link at the name is never written through (``--force`` replaces the
link itself), a link on the way is followed only where no other user could have made
it; and what is imported is a regular file (or stdin) of a bounded size, whatever
stands at the name."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from mcpd.cli.main import main
from mcpd.cli.pins import files
from tests.support.clients.agent import running
from tests.support.daemons.pins import Changing, cli, config

LIMIT = 60


@asynccontextmanager
async def daemon_socket(tmp_path: Path) -> AsyncIterator[str]:
    server = Changing(tmp_path)
    cfg = config(tmp_path, {"tickets": server.config()})
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            yield daemon.socket_path


async def test_export_to_a_link_is_refused_naming_it_and_force_replaces_the_link(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "victim.txt"
    target.write_text("mine\n")
    out = tmp_path / "mcpd-pins.json"
    out.symlink_to(target)
    async with daemon_socket(tmp_path) as sock:
        code, _, err = await cli(sock, "pins", "export", "-o", str(out))
        assert code == 2, err
        assert f"{out} is a symbolic link to {target}, which mcpd does not write" in err
        assert "Traceback" not in err
        assert target.read_text() == "mine\n" and out.is_symlink()

        code, said, err = await cli(sock, "pins", "export", "-o", str(out), "--force")
        assert code == 0, err
    assert "pinned items of 1 server(s)" in said
    assert not out.is_symlink() and "tickets" in json.loads(out.read_text())["servers"]
    assert target.read_text() == "mine\n"


async def test_export_to_a_link_to_nothing_creates_nothing_where_it_points(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "planted"
    out = tmp_path / "mcpd-pins.json"
    out.symlink_to(missing)
    async with daemon_socket(tmp_path) as sock:
        code, _, err = await cli(sock, "pins", "export", "-o", str(out))
        assert code == 2 and "is a symbolic link" in err, err
        assert not missing.exists() and out.is_symlink()
        code, _, err = await cli(sock, "pins", "export", "-o", str(out), "--force")
        assert code == 0, err
    assert not missing.exists() and not out.is_symlink()


async def test_export_makes_a_new_file_as_a_shells_redirection_would_and_keeps_one_there(
    tmp_path: Path,
) -> None:
    out = tmp_path / "mcpd-pins.json"
    async with daemon_socket(tmp_path) as sock:
        code, _, err = await cli(sock, "pins", "export", "-o", str(out))
        assert code == 0, err
        umask = os.umask(0o022)
        os.umask(umask)
        assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask
        out.write_text("# mine\n")
        code, _, err = await cli(sock, "pins", "export", "-o", str(out))
        assert code == 2 and f"{out} exists (use --force to replace it)" in err, err
    assert out.read_text() == "# mine\n"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


async def test_export_follows_no_link_on_the_way_that_another_user_could_have_made(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "team").symlink_to(real)
    shared.chmod(0o777)
    async with daemon_socket(tmp_path) as sock:
        code, _, err = await cli(sock, "pins", "export", "-o", str(shared / "team" / "p.json"))
    assert code == 2, err
    assert "can be written by every user" in err and "Traceback" not in err
    assert list(real.iterdir()) == []


# -- what pins import reads --


def importing(path: str) -> subprocess.CompletedProcess[str]:
    """``mcpd pins import PATH`` with no daemon to take it: what it makes of the file
    is said before the daemon is asked (a hang is a failure, not a wait)."""
    argv = [sys.executable, "-m", "mcpd", "pins", "import", path, "--socket", "/nonexistent"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=LIMIT)


def test_import_of_a_link_to_a_device_is_refused_unread(tmp_path: Path) -> None:
    link = tmp_path / "pins.json"
    link.symlink_to("/dev/zero")
    done = importing(str(link))
    assert done.returncode == 2, done.stderr
    assert f"cannot read {link}: it is a character device, not a regular file" in done.stderr
    assert "Traceback" not in done.stderr


def test_import_of_a_fifo_or_a_directory_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "pins.json"
    os.mkfifo(fifo)
    done = importing(str(fifo))
    assert done.returncode == 2 and "it is a FIFO, not a regular file" in done.stderr
    done = importing(str(tmp_path))
    assert done.returncode == 2 and "it is a directory, not a regular file" in done.stderr


def test_import_of_a_file_past_the_bound_is_refused_naming_it(tmp_path: Path) -> None:
    big = tmp_path / "pins.json"
    with big.open("wb") as f:
        f.truncate(files.MAX_IMPORT_BYTES + 1)  # sparse: nothing written
    done = importing(str(big))
    assert done.returncode == 2, done.stderr
    bound = f"{files.MAX_IMPORT_BYTES:,}"
    assert f"cannot read {big}: it is larger than {bound} bytes" in done.stderr
    assert "Traceback" not in done.stderr


def test_import_from_stdin_reads_no_more_than_the_bound(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(files, "MAX_IMPORT_BYTES", 16)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"servers": {}}' + b" " * 99)))
    with pytest.raises(SystemExit) as done:
        main(["pins", "import", "-", "--socket", "/nonexistent"])
    assert done.value.code == 2
    assert "cannot read stdin: it is larger than 16 bytes" in capsys.readouterr().err


async def test_import_longer_than_the_daemon_reads_is_refused_naming_its_limit(
    tmp_path: Path,
) -> None:
    """An export that would make a request past the daemon's ``max_line_bytes`` is
    refused before it is sent, with both sizes and the key that raises it: sent, it
    would only have cost the connection."""
    server = Changing(tmp_path)
    cfg = config(tmp_path, {"tickets": server.config()}, max_line_bytes=8192)
    export = tmp_path / "big.json"
    export.write_text(json.dumps({"format": 1, "servers": {}, "padding": "x" * 10_000}))
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            code, _, err = await cli(daemon.socket_path, "pins", "import", str(export))
    assert code == 2, err
    assert "longer than the 8,192 bytes mcpd reads (max_line_bytes in [daemon])" in err, err
    assert "Traceback" not in err and "lost the connection" not in err
