"""A whole shell line written in ``command`` is the config's error, which says how to
split it into ``command`` and ``args``; a program whose path holds a space is not one."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpd.config.checks.servers import server_errors
from mcpd.config.tables.servertable import ServerConfig


def errors(command: str, env: dict[str, str] | None = None, cwd: str | None = None) -> list[str]:
    server = ServerConfig(command=command, env=env or {}, cwd=cwd)
    return [str(e) for e in server_errors("fs", server)]


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    (tmp_path / "npx").write_text("#!/bin/sh\n")
    (tmp_path / "npx").chmod(0o755)
    return tmp_path


def test_a_command_line_is_split_for_the_user(bin_dir: Path) -> None:
    line = "npx -y @modelcontextprotocol/server-filesystem /tmp"
    assert errors(line, env={"PATH": str(bin_dir)}) == [
        f'servers.fs.command: "{line}" is a whole command line, and no program has that '
        "name; give the program in command and its arguments in args: "
        'command = "npx", args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]'
    ]


@pytest.mark.parametrize(
    "line",
    [
        # A name not installed yet is still a program's name, not a file's.
        "uvx mcp-server-time",
        "/bin/sh -c 'exec notes --quiet'",
    ],
)
def test_a_command_line_is_told_whether_its_program_is_found_or_not(line: str) -> None:
    [error] = errors(line, env={"PATH": "/nonexistent"})
    assert "is a whole command line" in error
    assert "give the program in command and its arguments in args" in error


def test_a_program_whose_path_holds_a_space_is_one(tmp_path: Path) -> None:
    program = tmp_path / "My Tools" / "server"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    assert errors(str(program)) == []
    # Not there yet: the check-config warning and the start say so, about the file.
    assert errors("/opt/My Tools/server") == []
    assert errors("tools/My Server", cwd=str(tmp_path)) == []
