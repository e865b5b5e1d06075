"""Config errors that say what to write instead: the values a key takes, the key a TOML
file sets twice, and what to do when there is no config file at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcpd.config.loading.load import load
from mcpd.config.tables.model import ConfigError
from tests.conftest import ROOT

STDIO = '[servers.s]\ncommand = "python3"\n'


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        (
            STDIO + 'start = "lazzy"\n',
            "servers.s.start: Invalid enum value 'lazzy'; did you mean \"lazy\"? "
            'give one of "eager", "lazy"',
        ),
        (
            STDIO + 'sandbox = "loose"\n',
            "servers.s.sandbox: Invalid enum value: a string of 5 characters; "
            'give one of "default", "off", "strict"',
        ),
        (
            STDIO + '[[policy]]\ntools = ["*"]\naction = "allow"\n'
            '[[policy]]\ntools = ["*"]\naction = "alow"\n',
            "policy[1].action: Invalid enum value 'alow'; did you mean \"allow\"? "
            'give one of "allow", "ask", "deny"',
        ),
        (
            '[profiles.p]\ndiscovery = "serch"\n',
            "profiles.p.discovery: Invalid enum value 'serch'; did you mean \"search\"? "
            'give one of "all", "auto", "search"',
        ),
        (
            STDIO + 'relay = ["roots", "elicit"]\n',
            "servers.s.relay[1]: Invalid enum value 'elicit'; did you mean \"elicitation\"? "
            'give one of "elicitation", "roots", "sampling"',
        ),
    ],
)
def test_a_value_outside_a_keys_few_says_which_it_takes(
    tmp_path: Path, toml: str, said: str
) -> None:
    path = tmp_path / "mcpd.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value) == f"{path}: {said}"


@pytest.mark.parametrize(
    ("toml", "key", "line"),
    [
        (STDIO + 'command = "python3.11"\n', "servers.s.command", 3),
        (
            'socket_mode = "0600"\n' + STDIO + "  [servers.s.limits]\n  memory = 1\n  memory=2\n",
            "servers.s.limits.memory",
            6,
        ),
        ("[servers]\ns = 1\n[servers.s]\n", "servers.s", 3),
    ],
)
def test_a_key_set_twice_is_said_by_where(tmp_path: Path, toml: str, key: str, line: int) -> None:
    path = tmp_path / "mcpd.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as caught:
        load(path)
    said = str(caught.value)
    assert said.startswith(f"{path}: not valid TOML: Cannot overwrite a value (at line {line}")
    assert said.endswith("; a key is set twice: write each key once in its table"), said


@pytest.mark.parametrize("command", [["check-config"], ["serve", "--log", "stderr"]])
def test_no_config_file_says_what_else_to_do(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "mcpd.toml"
    out = subprocess.run(
        [sys.executable, "-m", "mcpd", *command, "--config", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MCPD_SOCKET": str(tmp_path / "s.sock")},
    )
    assert out.returncode == 78
    assert out.stderr.rstrip("\n").endswith(
        f"config error: config file '{missing}' not found: name another with --config "
        "(or $MCPD_CONFIG), write one from another host's with `mcpd import`, or try mcpd "
        "with `mcpd serve --demo`"
    ), out.stderr


def check_config(tmp_path: Path, toml: str) -> subprocess.CompletedProcess[str]:
    """``mcpd check-config`` on ``toml``, as a user runs it."""
    path = tmp_path / "mcpd.toml"
    path.write_text(toml)
    return subprocess.run(
        [sys.executable, "-m", "mcpd", "check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MCPD_SOCKET": str(tmp_path / "s.sock")},
    )


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        (
            '[servers.notes]\ncomand = "python3"\n',
            'servers.notes.comand: unknown key; did you mean "command"?',
        ),
        ('[server.notes]\ncommand = "python3"\n', 'server: unknown key; did you mean "servers"?'),
        (
            "[naming]\nwhatever = 1\n",
            "naming.whatever: unknown key; naming takes max_length, template",
        ),
        (
            STDIO + 'call_timeout = "30s"\n',
            'servers.s.call_timeout: expected a number of seconds, got the string "30s"',
        ),
        (
            "[daemon]\nhttp_listen = 8765\n",
            "daemon.http_listen: expected a string, got the number 8765",
        ),
        (
            STDIO + 'args = "-v"\n',
            # An argument may be a secret: said by its kind, not written.
            "servers.s.args: expected an array of strings, got a string of 2 characters",
        ),
        (
            STDIO + 'enabled = "yes"\n',
            'servers.s.enabled: expected true or false, got the string "yes"',
        ),
        (
            '[[policy]]\ntools = ["*"]\naction = 1\n',
            'policy[0].action: expected one of "allow", "ask", "deny", got the number 1',
        ),
        (
            '[servers."notes.x"]\ncommand = "python3"\n',
            'servers."notes.x": an alias must be non-empty and made of A-Z a-z 0-9 _ -; '
            '"notes_x" would do',
        ),
        # A value that may be a secret is said by its kind alone.
        (
            STDIO + "env = { API_TOKEN = 81726354 }\n",
            "servers.s.env.API_TOKEN: expected a string, got a whole number",
        ),
    ],
)
def test_a_wrong_key_or_type_says_what_to_write(tmp_path: Path, toml: str, said: str) -> None:
    out = check_config(tmp_path, toml)
    assert (out.returncode, out.stderr) == (
        78,
        f"mcpd: config error: {tmp_path / 'mcpd.toml'}: {said}\n",
    )


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        (
            "[servers.notes]\ncommand = python3  # the interpreter\n",
            'Invalid value (at line 2, column 11); text values need quotes: key = "..."',
        ),
        (
            '[servers.notes]\ncommand = "python3"\n[servers.notes]\nargs = []\n',
            "Cannot declare [servers.notes] twice (at line 3, column 15); "
            "write each table once, with all its keys under it",
        ),
        (
            '[servers."a.b"]\ncommand = "x"\n[servers."a.b"]\n',
            'Cannot declare [servers."a.b"] twice (at line 3, column 15); '
            "write each table once, with all its keys under it",
        ),
        (
            STDIO + "trusted = True\n",
            "Invalid value (at line 3, column 11); write true or false in lower case",
        ),
        # Other formats' words for true or false: quoted, they would be refused next.
        (
            STDIO + "enabled = yes\n",
            "Invalid value (at line 3, column 11); "
            'write true or false for a switch (text values need quotes: key = "...")',
        ),
        (
            STDIO + "enabled = OFF\n",
            "Invalid value (at line 3, column 11); "
            'write true or false for a switch (text values need quotes: key = "...")',
        ),
        (
            STDIO + "call_timeout = 30s\n",
            "Expected newline or end of document after a statement (at line 3, column 18); "
            "a number takes no unit: a time is a number of seconds (30), "
            'a size with a unit is text ("512M")',
        ),
        (
            STDIO + "tool_timeouts = { search = 1.5 m }\n",
            "Unclosed inline table (at line 3, column 32); "
            "a number takes no unit: a time is a number of seconds (30), "
            'a size with a unit is text ("512M")',
        ),
        # A value that is a secret is not shown, even where it lacks its quotes.
        (
            STDIO + "env = { API_TOKEN = s3cr3t-v4lue }\n",
            'Invalid value (at line 3, column 21); text values need quotes: key = "..."',
        ),
        (
            "[servers.notes\n",
            "Expected ']' at the end of a table declaration (at line 1, column 15)",
        ),
        (
            '[servers.t]\nurl = "http://h/mcp"\n[servers.t.auth]\nclient_secret = "s3cr3t-v4lue\n',
            "Illegal character '\\n' (at line 4, column 30)",
        ),
    ],
)
def test_toml_a_person_got_wrong_is_shown_with_what_to_write(
    tmp_path: Path, toml: str, said: str
) -> None:
    out = check_config(tmp_path, toml)
    path = tmp_path / "mcpd.toml"
    assert (out.returncode, out.stderr) == (
        78,
        f"mcpd: config error: {path}: not valid TOML: {said}\n",
    )
