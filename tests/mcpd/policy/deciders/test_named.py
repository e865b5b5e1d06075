"""A process in words a person knows it by: the command of mcpd's a command line reads
as, however mcpd was started, and nothing for any other program."""

from __future__ import annotations

import os
import sys

import pytest

from mcpd.policy.deciders.named import command_of_mcpd, mcpd_command_of, program_of


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["/home/a/mcpd/.venv/bin/mcpd", "call", "mcp__notes__search", "{}"], "mcpd call"),
        (["/usr/bin/python3.11", "/home/a/.venv/bin/mcpd", "read", "x"], "mcpd read"),
        (["python3", "-m", "mcpd", "prompt", "p"], "mcpd prompt"),
        (["mcpd", "--socket", "/tmp/s", "call"], "mcpd"),
        (["bash"], None),
        (["python3", "-c", "print()", "mcpd", "call"], None),
        (["mcpd", "call\x1b[2J"], "mcpd"),
        (["mcpd", "tools", "--socket", "/tmp/s", "--json"], "mcpd tools --json"),
        (["python3", "-m", "mcpd", "prompts", "--format=openai"], "mcpd prompts --format"),
        (["mcpd", "resources", "--format", "openai"], "mcpd resources --format"),
        (["mcpd", "tools"], "mcpd tools"),
        (["mcpd", "call", "t", "--json"], "mcpd call"),
    ],
)
def test_a_command_line_of_mcpd_names_its_command(argv: list[str], command: str | None) -> None:
    assert command_of_mcpd(argv) == command


def test_a_running_process_is_named_by_its_program() -> None:
    assert program_of(os.getpid()) == os.path.basename(os.path.realpath(sys.executable))
    assert mcpd_command_of(os.getpid()) is None  # pytest, not mcpd
    assert program_of(2**22 + 7) is None and mcpd_command_of(2**22 + 7) is None
