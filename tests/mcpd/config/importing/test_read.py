"""A host's file read for ``mcpd import`` as carefully as mcpd's own config: refused when
another user could have chosen what it says, a directory or a found path that is not a
regular file refused, a pipe the user names read, and each refusal naming the path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcpd.config.importing.read import read_host_file
from mcpd.config.tables.model import ConfigError

TEXT = '{"mcpServers": {"a": {"command": "srv"}}}\n'


def host_file(tmp_path: Path, text: str = TEXT, mode: int = 0o600) -> Path:
    path = tmp_path / ".mcp.json"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_file_of_the_users_own_is_read(tmp_path: Path) -> None:
    assert read_host_file(str(host_file(tmp_path))) == TEXT
    assert read_host_file(str(host_file(tmp_path)), named=False) == TEXT


def test_a_file_others_may_write_is_refused_as_their_commands(tmp_path: Path) -> None:
    path = host_file(tmp_path, mode=0o666)
    with pytest.raises(ConfigError) as info:
        read_host_file(str(path))
    assert str(info.value) == (
        f"host file not trusted: {path} can be written by every user (mode 0666); run "
        f"chmod go-w {path}; its servers would run as your user"
    )


def test_a_missing_file_or_a_directory_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "nothing")
    with pytest.raises(ConfigError) as info:
        read_host_file(missing)
    assert str(info.value) == f"cannot read {missing!r}: No such file or directory"
    with pytest.raises(ConfigError) as info:
        read_host_file(str(tmp_path))
    assert str(info.value) == f"cannot read {str(tmp_path)!r}: it is a directory"


def test_text_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('{"a": "é"}'.encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        read_host_file(str(path))


def test_a_pipe_is_read_when_the_user_named_it_and_refused_when_mcpd_found_it(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "piped"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ConfigError, match="is not a regular file"):
        read_host_file(str(fifo), named=False)  # opened without waiting for a writer

    # Held open for reading, so that what is written waits in the pipe for the reader.
    keeper = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with open(fifo, "w") as writer:
            writer.write(TEXT)
        assert read_host_file(str(fifo)) == TEXT
    finally:
        os.close(keeper)
