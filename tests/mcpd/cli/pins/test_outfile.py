"""The file a person names for a command's output: created only where the name is free
(a link there is named, not written through), replaced whole with ``force``, given the
mode a shell's ``>`` gives, and synced with its directory before the command returns."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.cli.pins.outfile import OutputExists, write_output
from mcpd.local.state.privatefile import UnsafeFileError


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What ``os.fsync`` was given, by kind: "file" or "directory"."""
    kinds: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        kinds.append("directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    yield kinds


def umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("force", [False, True], ids=["new", "forced"])
def test_the_file_and_then_its_directory_are_synced(
    tmp_path: Path, synced: list[str], force: bool
) -> None:
    out = tmp_path / "pins.json"
    write_output(str(out), b"{}\n", force=force)
    assert out.read_bytes() == b"{}\n"
    assert synced == ["file", "directory"]


@pytest.mark.parametrize("force", [False, True], ids=["new", "forced"])
def test_the_file_gets_the_mode_a_shell_would_give_and_nothing_is_left_beside_it(
    tmp_path: Path, force: bool
) -> None:
    out = tmp_path / "pins.json"
    write_output(str(out), b"x", force=force)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask()
    assert os.listdir(tmp_path) == ["pins.json"]


def test_a_taken_name_is_refused_without_force_and_left_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "pins.json"
    out.write_bytes(b"mine")
    with pytest.raises(OutputExists, match="exists \\(use --force to replace it\\)"):
        write_output(str(out), b"new", force=False)
    assert out.read_bytes() == b"mine"
    write_output(str(out), b"new", force=True)
    assert out.read_bytes() == b"new"


def test_a_link_at_the_name_is_named_and_force_replaces_the_link_not_its_target(
    tmp_path: Path,
) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"theirs")
    out = tmp_path / "pins.json"
    out.symlink_to(target)
    with pytest.raises(OutputExists, match=f"is a symbolic link to {target}"):
        write_output(str(out), b"new", force=False)
    write_output(str(out), b"new", force=True)
    assert not out.is_symlink() and out.read_bytes() == b"new"
    assert target.read_bytes() == b"theirs"


def test_a_dangling_link_at_the_name_is_refused_too(tmp_path: Path) -> None:
    out = tmp_path / "pins.json"
    out.symlink_to(tmp_path / "nowhere")
    with pytest.raises(OutputExists, match="is a symbolic link"):
        write_output(str(out), b"new", force=False)
    assert not (tmp_path / "nowhere").exists()


def test_a_name_that_is_no_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsafeFileError, match="names a directory, not a file"):
        write_output(f"{tmp_path}/..", b"x", force=True)
