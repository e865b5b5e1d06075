"""One reading of a config says every error its tables hold, each on a line of its own
naming the file and the key, so that a file with several mistakes is fixed in one go."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpd.config.loading.load import load
from mcpd.config.tables.model import ConfigError

A_YEAR = "must be positive, at most 31536000 (a year)"


def error_of(tmp_path: Path, text: str) -> tuple[Path, ConfigError]:
    path = tmp_path / "mcpd.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load(path, env={})
    return path, caught.value


def test_every_error_of_the_tables_is_said_the_first_as_the_error(tmp_path: Path) -> None:
    path, error = error_of(
        tmp_path,
        '[daemon]\ncall_timeout = 0\nsocket = "relative.sock"\n'
        '[servers.a]\ncommand = "x"\ncall_timeout = -1\n'
        '[servers.b]\nurl = "ftp://x"\n',
    )
    assert str(error).splitlines() == [
        f"{path}: daemon.socket: must be an absolute path (~ is not expanded here)",
        f"{path}: daemon.call_timeout: {A_YEAR}",
        f"{path}: servers.a.call_timeout: {A_YEAR}",
        f"{path}: servers.b.url: must be an http:// or https:// URL",
    ]
    assert (error.file, error.path) == (str(path), "daemon.socket")
    assert [e.path for e in error.more] == [
        "daemon.call_timeout",
        "servers.a.call_timeout",
        "servers.b.url",
    ]


def test_what_ties_the_tables_together_is_checked_once_they_are_sound(tmp_path: Path) -> None:
    policy = '[[policy]]\ntools = ["nosuch/*"]\naction = "deny"\n'
    _, error = error_of(
        tmp_path, f'[daemon]\ncall_timeout = 0\n[servers.a]\ncommand = "x"\n{policy}'
    )
    assert error.path == "daemon.call_timeout" and error.more == ()
    _, error = error_of(tmp_path, f'[servers.a]\ncommand = "x"\n{policy}')
    assert error.path == "policy[0].tools[0]"


def test_one_bad_delay_is_said_once(tmp_path: Path) -> None:
    _, error = error_of(tmp_path, "[daemon]\nbackoff_base = inf\n")
    assert (error.path, error.message, error.more) == ("daemon.backoff_base", A_YEAR, ())
