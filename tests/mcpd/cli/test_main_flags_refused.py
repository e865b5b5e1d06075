"""Options that would do nothing, or something other than asked, are refused: a value no
option can use, a pair whose one half would be ignored, a socket path that is empty or blank, a
server's alias nothing knows; and a config ``$MCPD_CONFIG`` names that could not be read
is said where the default socket was tried in its place."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.config.loading import paths
from tests.support.cli.in_process import exit_of, usage_error
from tests.support.daemons.as_operator import client, start, stop
from tests.support.daemons.fake import answering as daemon
from tests.support.system.procs import scripted

# One name too long for a host that keeps 28 characters after its own prefix.
TOOLS = [
    {"name": "mcp__notes__search", "_meta": {"mcpd/server": "notes"}},
    {"name": "mcp__evil__x", "_meta": {"mcpd/server": "evil"}},
    {"name": "mcp__bare__tool"},
]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["status", "--watch", "-1"], "argument --watch: must be at least 0.2 seconds, not -1"),
        (["status", "--watch", "0"], "argument --watch: must be at least 0.2 seconds, not 0"),
        (["status", "--watch", "0.1"], "argument --watch: must be at least 0.2 seconds, not 0.1"),
        (["status", "--watch", "nan"], "argument --watch: must be at least 0.2 seconds, not nan"),
        (["tools", "--check-names", "-5"], "must be at least 1 character, not -5"),
        (["tools", "--check-names", "0"], "must be at least 1 character, not 0"),
        (["status", "--socket", ""], "--socket: a path empty or of only spaces names no socket"),
        (["approve", "notes", "--socket", ""], "argument --socket: a path empty or of only"),
        (["serve", "--socket", ""], "--socket: a path empty or of only spaces names no socket"),
        (["status", "--socket", " "], "--socket: a path empty or of only spaces names no socket"),
        (
            ["serve", "--socket", "\t \n"],
            "--socket: a path empty or of only spaces names no socket",
        ),
        (["serve", "--demo", "--config", "x.toml"], "--config: not allowed with argument --demo"),
        (["serve", "--config", "x.toml", "--demo"], "--demo: not allowed with argument --config"),
    ],
)
def test_a_value_the_option_cannot_use_is_a_usage_error(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    usage, error = usage_error(argv, capsys)
    assert said in error
    assert usage.startswith(f"usage: mcpd {argv[0]}")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--host-prefix", "mcp__mcpd__"], "--host-prefix is for --check-names"),
        (["--check-names", "64", "--format", "openai"], "--check-names reports on the names"),
        (["--pending", "--format", "openai"], "--pending does not go with --format"),
        (["--findings", "--format", "anthropic"], "--findings does not go with --format"),
        (["--pending", "--check-names", "64"], "--pending does not go with --check-names"),
        (["--pending", "--findings"], "--pending does not go with --findings"),
    ],
)
def test_tools_options_one_of_which_would_be_ignored_are_refused(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused before any daemon is asked: none listens on this socket.
    usage, error = usage_error(["tools", "--socket", str(tmp_path / "none.sock"), *argv], capsys)
    assert said in error
    assert usage.startswith("usage: mcpd tools")


def test_check_names_with_json_prints_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = tmp_path / "mcpd.sock"
    prefix = ["--check-names", "28", "--host-prefix", "mcp__mcpd__", "--json"]
    with daemon(sock, tools_list={"tools": TOOLS}):
        assert exit_of(["tools", "--socket", str(sock), *prefix]) == 1
        report = json.loads(capsys.readouterr().out)
        assert report == {
            "limit": 28,
            "host_prefix": "mcp__mcpd__",
            "tools": 3,
            "too_long": [{"name": "mcp__notes__search", "length": 29}],
            "max_length": 17,
        }
        assert exit_of(["tools", "--socket", str(sock), "--check-names", "64", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["too_long"] == []


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ("missing.toml", "No such file or directory"),
        ("a-directory", "Is a directory"),
        # Neither waited on (nothing writes to the FIFO) nor read to its end.
        ("a-fifo", "not a regular file"),
        ("/dev/zero", "not a regular file"),
    ],
)
def test_a_config_mcpd_config_names_that_cannot_be_read_is_said_beside_no_daemon(
    config: str,
    why: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "a-directory").mkdir()
    os.mkfifo(tmp_path / "a-fifo")
    monkeypatch.delenv("MCPD_SOCKET", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("MCPD_CONFIG", str(tmp_path / config))
    assert exit_of(["status"]) == 3
    err = capsys.readouterr().err
    assert "no mcpd is listening on " in err
    assert f"$MCPD_CONFIG names {tmp_path / config}, which could not be read ({why})" in err
    assert "so the default socket was tried" in err
    # Given a socket, the config was never to be read: nothing is said of it.
    assert exit_of(["status", "--socket", str(tmp_path / "none.sock")]) == 3


def test_a_config_mcpd_config_names_that_is_not_toml_is_said_beside_no_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[daemon]\nsocket = "/srv/mcpd.sock\n')
    monkeypatch.delenv("MCPD_SOCKET", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("MCPD_CONFIG", str(config))
    reads: list[str] = []
    read = paths._config_bytes
    monkeypatch.setattr(paths, "_config_bytes", lambda path: reads.append(path) or read(path))
    assert exit_of(["status"]) == 3
    # Looked in for the socket, then said why not: read once, which a file near the
    # size bound makes worth it.
    assert reads == [str(config)]
    err = capsys.readouterr().err
    assert "no mcpd is listening on " in err
    assert f"$MCPD_CONFIG names {config}, which could not be read as TOML (" in err
    assert "(at line 2, column " in err
    assert "so the default socket was tried" in err
    assert "MCPD_CONFIG" not in capsys.readouterr().err


@pytest.fixture
def running_mcpd(tmp_path: Path) -> Iterator[Path]:
    command, args = scripted()
    config = tmp_path / "mcpd.toml"
    config.write_text(
        f"[servers.notes]\ncommand = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"
    )
    sock = tmp_path / "mcpd.sock"
    proc = start(["--config", str(config)], sock)
    try:
        yield sock
    finally:
        stop(proc)


def test_approve_of_a_server_no_one_configured_says_so_and_fails(running_mcpd: Path) -> None:
    done = client(running_mcpd, "approve", "nots", "--yes")
    assert done.returncode == 1
    assert "no server named 'nots'" in done.stderr
    assert "waits for approval" not in done.stdout
    # The server's own alias: nothing of it waits, which is no failure.
    done = client(running_mcpd, "approve", "notes", "--yes")
    assert done.returncode == 0
    assert "nothing of notes waits for approval" in done.stdout
