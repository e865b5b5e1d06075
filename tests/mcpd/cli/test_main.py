"""The command line's grammar and entry point (``mcpd.cli.main``), called in this
process: every usage error is one line under the command's own usage and exits 2,
help and version exit 0, a command's own code is the exit code, and no word typed
on the command line reaches the terminal as a control character."""

from __future__ import annotations

import argparse
import sys

import pytest

from mcpd import __version__
from mcpd.cli import client_cmds
from mcpd.cli.main import COMMANDS
from mcpd.cli.pins import pending
from tests.support.cli.in_process import exit_of, usage_error

ESC = "\x1b"


def test_no_command_is_a_usage_error_naming_what_is_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, error = usage_error([], capsys)
    assert error == "mcpd: error: the following arguments are required: command"


def test_a_word_that_is_no_command_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    _, error = usage_error(["serv"], capsys)
    assert "invalid choice: 'serv'" in error
    for command in ("serve", "check-config", "status", "prompts"):
        assert f"'{command}'" in error


@pytest.mark.parametrize("argv", [["--help"], ["-h"]])
def test_help_lists_every_command_and_exits_0(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_of(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: mcpd")
    for command in COMMANDS:
        assert command in out


def test_version_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_of(["--version"]) == 0
    assert capsys.readouterr().out == f"mcpd {__version__}\n"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_commands_help_is_its_own_and_exits_0(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_of([command, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: mcpd {command}")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_commands_unknown_option_is_one_line_under_its_own_usage(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    usage, error = usage_error([command, "--no-such-option"], capsys)
    assert usage.startswith(f"usage: mcpd {command}")
    assert error.startswith(f"mcpd {command}: error: ")
    # (a command missing its own arguments says so first)
    assert "--no-such-option" in error or "arguments are required" in error


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["call"], "the following arguments are required: name"),
        (["call", "t", "{}", "extra"], "unrecognized arguments: extra"),
        (["status", "--watch", "soon"], "not a number of seconds: 'soon'"),
        (["tools", "--format", "xml"], "invalid choice: 'xml'"),
        (["tools", "--check-names", "ten"], "not a whole number of characters: 'ten'"),
        (["serve", "--log", "syslog"], "invalid choice: 'syslog'"),
        (["serve", "--config"], "expected one argument"),
        (["import"], "the following arguments are required: PATH|HOST"),
    ],
)
def test_a_commands_bad_arguments_are_one_line_under_its_usage(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    usage, error = usage_error(argv, capsys)
    assert usage.startswith(f"usage: mcpd {argv[0]}")
    assert error.startswith(f"mcpd {argv[0]}: error: ")
    assert says in error


@pytest.mark.parametrize(
    "argv",
    [
        ["status", f"--{ESC}]0;owned{ESC}\\"],
        ["status", f"{ESC}[2J{ESC}[Hall clear"],
        ["call", "t", "{}", f"x\nmcpd: done, nothing went wrong{ESC}[8m"],
        ["tools", "--bogus", "\u202eevil"],
    ],
)
def test_words_echoed_in_a_usage_error_cannot_drive_the_terminal(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, error = usage_error(argv, capsys)
    err = capsys.readouterr().err  # already read: what usage_error saw is all there was
    assert err == ""
    assert ESC not in error and "\u202e" not in error
    assert "unrecognized arguments" in error


def test_a_commands_code_is_the_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[argparse.Namespace] = []

    def reload(args: argparse.Namespace) -> int:
        seen.append(args)
        return 3

    monkeypatch.setattr(client_cmds, "cmd_reload", reload)
    assert exit_of(["reload", "--socket", "/run/x.sock"]) == 3
    [args] = seen
    assert args.socket == "/run/x.sock"


@pytest.mark.parametrize(
    "argv",
    [
        ["approve", "h", "--yes", "deploy.prod", "send"],
        ["approve", "--yes", "h", "deploy.prod", "send"],
        ["approve", "h", "deploy.prod", "--yes", "send"],
    ],
)
def test_approves_names_may_come_before_and_after_its_options(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[argparse.Namespace] = []

    def approve(args: argparse.Namespace) -> int:
        seen.append(args)
        return 0

    monkeypatch.setattr(pending, "cmd_approve", approve)
    assert exit_of(argv) == 0
    [args] = seen
    assert (args.command, args.server, args.names, args.yes) == (
        "approve",
        "h",
        ["deploy.prod", "send"],
        True,
    )


def test_a_word_approve_does_not_take_is_still_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    usage, error = usage_error(["approve", "h", "--yes", "x", "--frob"], capsys)
    assert usage.startswith("usage: mcpd approve")
    assert error == "mcpd approve: error: unrecognized arguments: --frob"


def test_ctrl_c_in_a_command_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    def reload(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(client_cmds, "cmd_reload", reload)
    assert exit_of(["reload"]) == 130


def test_a_closed_pipe_on_stdout_is_a_quiet_exit_0(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # `mcpd tools | head -1`: the reader went away; what is left to print goes nowhere.
    def reload(args: object) -> int:
        raise BrokenPipeError

    monkeypatch.setattr(client_cmds, "cmd_reload", reload)
    assert exit_of(["reload"]) == 0
    print("after", file=sys.stdout, flush=True)  # now to /dev/null, not an error
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_an_error_a_command_does_not_catch_is_not_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def reload(args: object) -> int:
        raise SystemExit(78)

    monkeypatch.setattr(client_cmds, "cmd_reload", reload)
    assert exit_of(["reload"]) == 78


def _parsers(
    parser: argparse.ArgumentParser, name: str = "mcpd"
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, subparser in action.choices.items():
                found += _parsers(subparser, f"{name} {sub}")
    return found


def test_every_option_and_argument_says_what_it_is_in_help() -> None:
    from mcpd.cli.main import build_parser

    missing = [
        f"{name} {'/'.join(action.option_strings) or action.dest}"
        for name, parser in _parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and action.help is None
    ]
    assert missing == []


def test_help_names_the_manual_page_and_the_exit_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert exit_of(["--help"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "mcpd(1)" in said and "man -l man/mcpd.1" in said
    for code, meaning in (
        ("0", "success"),
        ("1", "the tool returned an error"),
        ("2", "usage"),
        ("3", "no daemon answers"),
        ("4", "its reply could not be read"),
        ("78", "configuration error"),
    ):
        assert f"{code} {meaning}" in said, code
