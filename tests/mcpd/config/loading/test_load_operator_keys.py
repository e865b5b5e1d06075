"""Config keys for operators: tool curation, per-tool timeouts, lazy servers, the tool
budget, ${file:...} secrets, and another host's JSON used as the config."""

from __future__ import annotations

import json
import os
import textwrap
import tomllib
from pathlib import Path

import pytest

from mcpd.config.loading.load import load, parse_config
from mcpd.config.tables.model import Config, ConfigError


def parse_toml(text: str, env: dict[str, str] | None = None) -> Config:
    return parse_config(tomllib.loads(textwrap.dedent(text)), env=env or {})


def error_of(text: str, env: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_toml(text, env)
    return info.value


def unresolved_of(text: str, env: dict[str, str] | None = None) -> str:
    """Why server ``s`` cannot start (a secret it cannot have stops it, not the config)."""
    reason = parse_toml(text, env).servers["s"].unresolved
    assert reason is not None
    return reason


CURATED = """\
[servers.files]
command = "fs-server"
start = "lazy"
idle_stop = 120
[servers.files.tools]
allow = ["read_*", "list_*", "search"]
deny = ["*_secret*"]
[servers.files.tools.rename]
search = "find_files"
[servers.files.tools.description]
read_file = "Read one file of the project."
[servers.files.tool_timeouts]
search = 300
"""


def test_curation_lazy_start_and_tool_timeouts_parse() -> None:
    config = parse_toml(CURATED)
    files = config.servers["files"]
    assert files.tools.allow == ["read_*", "list_*", "search"]
    assert files.tools.deny == ["*_secret*"]
    assert files.tools.rename == {"search": "find_files"}
    assert files.tools.description == {"read_file": "Read one file of the project."}
    assert (files.start, files.idle_stop) == ("lazy", 120.0)
    assert config.daemon.max_tools == 128


def test_a_tool_timeout_wins_over_the_server_and_daemon_ones() -> None:
    config = parse_toml(CURATED)
    assert config.call_timeout("files", "search") == 300.0
    assert config.call_timeout("files", "read_file") == 60.0
    assert config.call_timeout("files") == 60.0
    config = parse_toml(CURATED.replace("idle_stop = 120", "idle_stop = 120\ncall_timeout = 20"))
    assert config.call_timeout("files", "read_file") == 20.0
    assert config.call_timeout("files", "search") == 300.0


STDIO = '[servers.s]\ncommand = "x"\n'


@pytest.mark.parametrize(
    ("text", "path", "message"),
    [
        (STDIO + 'start = "lazy"\nidle_stop = -1\n', "servers.s.idle_stop", "positive"),
        (STDIO + 'start = "later"\n', "servers.s.start", "Invalid enum value"),
        (STDIO + '[servers.s.tools]\nalow = ["x"]\n', "servers.s.tools.alow", "unknown key"),
        (STDIO + "[servers.s.tools.rename]\nx = 1\n", "servers.s.tools.rename.x", "a string, got"),
        (STDIO + '[servers.s.tools]\nallow = [""]\n', "servers.s.tools.allow[0]", "is empty"),
        (STDIO + '[servers.s.tools.rename]\na = "c"\nb = "c"\n', "servers.s.tools.rename.b", "'a'"),
        (STDIO + '[servers.s.tools.rename]\na = " "\n', "servers.s.tools.rename.a", "is empty"),
        (
            STDIO + "[servers.s.tool_timeouts]\nslow = 0\n",
            "servers.s.tool_timeouts.slow",
            "positive",
        ),
        (
            STDIO + '[servers.s.tool_timeouts]\nslow = "x"\n',
            "servers.s.tool_timeouts.slow",
            "expected a number of seconds, got a string of 1 character",
        ),
        (STDIO + "[daemon]\nmax_tools = 0\n", "daemon.max_tools", "at least 1"),
    ],
)
def test_bad_operator_keys_name_their_path(text: str, path: str, message: str) -> None:
    err = error_of(text)
    assert err.path == path, err
    assert message in err.message


def test_lazy_is_for_stdio_servers_only() -> None:
    err = error_of('[servers.web]\nurl = "http://127.0.0.1:9/mcp"\nstart = "lazy"\n')
    assert err.path == "servers.web.start"
    assert "stdio" in err.message


# -- ${file:...} --


def secret_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "token"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_file_secret_is_read_without_its_trailing_newline(tmp_path: Path) -> None:
    path = secret_file(tmp_path, "s3cret-value\n")
    config = parse_toml(
        f"""
        [servers.t]
        url = "https://tickets.example.com/mcp"
        headers = {{ Authorization = "Bearer ${{file:{path}}}" }}
        """
    )
    assert config.servers["t"].headers["Authorization"] == "Bearer s3cret-value"


def test_a_relative_file_secret_comes_from_the_credentials_directory(tmp_path: Path) -> None:
    secret_file(tmp_path, "from-systemd\r\n", 0o400)
    config = parse_toml(
        '[servers.s]\ncommand = "x"\nenv = { TOKEN = "${file:token}" }\n',
        env={"CREDENTIALS_DIRECTORY": str(tmp_path)},
    )
    assert config.servers["s"].env["TOKEN"] == "from-systemd"
    reason = unresolved_of('[servers.s]\ncommand = "x"\nenv = { TOKEN = "${file:token}" }\n')
    assert reason.startswith("servers.s.env.TOKEN: ")
    assert "CREDENTIALS_DIRECTORY" in reason


def test_under_systemd_a_missing_credential_says_it_takes_a_restart(tmp_path: Path) -> None:
    """A user who just added LoadCredential= and reloaded learns that a reload cannot
    bring it."""
    text = '[servers.s]\ncommand = "x"\nenv = { TOKEN = "${file:tickets-token}" }\n'
    for env in (
        {"INVOCATION_ID": "0123abcd"},
        {"INVOCATION_ID": "0123abcd", "CREDENTIALS_DIRECTORY": str(tmp_path)},
    ):
        message = unresolved_of(text, env)
        assert "LoadCredential=" in message and "Environment=" in message
        assert "next `systemctl restart mcpd`, not at a reload" in message
    assert "systemctl restart" not in unresolved_of(text, {})  # not under systemd


def test_a_world_readable_secret_file_is_refused_without_showing_it(tmp_path: Path) -> None:
    path = secret_file(tmp_path, "do-not-print-me\n", 0o644)
    reason = unresolved_of(f'[servers.s]\ncommand = "x"\nenv = {{ TOKEN = "${{file:{path}}}" }}\n')
    assert reason.startswith("servers.s.env.TOKEN: ")
    assert "readable by every user" in reason and "chmod o-r" in reason
    assert "do-not-print-me" not in reason


def test_a_missing_secret_file_stops_its_server_naming_the_key(tmp_path: Path) -> None:
    reason = unresolved_of(f'[servers.s]\ncommand = "${{file:{tmp_path}/nope}}"\n')
    assert reason == f"servers.s.command: secret file '{tmp_path}/nope' does not exist"


def test_a_secret_file_outside_a_server_is_still_a_config_error(tmp_path: Path) -> None:
    err = error_of(f'[daemon]\nsocket = "${{file:{tmp_path}/nope}}"\n')
    assert err.path == "daemon.socket"
    assert "does not exist" in err.message


def test_dollar_dollar_still_escapes_a_file_reference(tmp_path: Path) -> None:
    config = parse_toml('[servers.s]\ncommand = "x"\nargs = ["$${file:/etc/passwd}"]\n')
    assert config.servers["s"].args == ["${file:/etc/passwd}"]


# -- another host's JSON as the config --


def test_serve_accepts_a_claude_desktop_file_as_its_config(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "memory": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-memory"],
                        "env": {"MEMORY_FILE_PATH": "/home/ada/memory.json"},
                    },
                    "remote api": {
                        "type": "http",
                        "url": "https://api.example.com/mcp",
                        "headers": {"X-API-Key": "${API_KEY}"},
                    },
                }
            }
        )
    )
    config = load(path, env={"API_KEY": "k-123"})
    assert config.servers["memory"].command == "npx"
    assert config.servers["memory"].env == {"MEMORY_FILE_PATH": "/home/ada/memory.json"}
    # The real value reaches the running config; only printed TOML hides secrets.
    assert config.servers["remote_api"].headers == {"X-API-Key": "k-123"}
    assert config.source == str(path)


def test_a_json_config_with_a_syntax_error_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {"a": {"command": "x",}')
    with pytest.raises(ConfigError, match="not valid JSON"):
        load(path, env={})


def test_file_secrets_need_the_file_to_be_private_even_for_root(tmp_path: Path) -> None:
    # Root can read anything, so the mode, not a failed open, is what refuses it.
    path = secret_file(tmp_path, "x", 0o604)
    assert os.stat(path).st_mode & 0o004
    assert "readable by every user" in unresolved_of(f'[servers.s]\ncommand = "${{file:{path}}}"\n')
