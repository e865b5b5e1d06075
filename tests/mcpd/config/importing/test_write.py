"""What ``mcpd import`` writes, called directly: TOML that reads back as the servers
imported whatever names and values the other host's file held, and secrets that
leave the TOML and come back, byte for byte, when the written config is loaded."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mcpd.config.importing.convert import Imported, import_text
from mcpd.config.importing.write import move_secrets, secrets_dir, to_toml
from mcpd.config.loading.load import load

TOKEN = "ghp_5mB2x9QvT7kLw3NcR8yZ1aHd4FjU6eP0sGiO"
STRIPE = "sk_live_51HqLyjWDarjtT1zdp7dcXyz0"


@pytest.fixture(autouse=True)
def quiet_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The importer looks at mcpd's environment for what a server inherits; none of
    this machine's variables may change what is written."""
    for name in list(os.environ):
        if name not in ("PATH", "HOME"):
            monkeypatch.delenv(name)


def imported(servers: dict[str, Any], source: str = "/home/ada/claude.json") -> Imported:
    return import_text(json.dumps({"mcpServers": servers}), source)


def written(result: Imported, tmp_path: Path) -> tuple[Path, dict[tuple[str, ...], Path]]:
    """``mcpd import -o``: the secrets moved aside, the TOML written beside them."""
    config = tmp_path / "config.toml"
    moved = move_secrets(result, secrets_dir(config))
    config.write_text(to_toml(result, moved))
    return config, moved


# -- the TOML --


def test_names_and_values_of_every_shape_read_back_as_they_were() -> None:
    servers = {
        "odd": {
            "command": "/opt/odd tool/run",
            "args": ['say "hi"', "back\\slash", "tab\there", "new\nline", "é", "#not-a-comment"],
            "env": {"A.B": "dotted", "with space": "x", "ünï": "y", "plain_KEY-1": "z"},
            "cwd": "/srv/a",
        },
        "api": {
            "url": "https://api.example.com/mcp",
            "headers": {"X-Trace": "on", "Accept-Language": "fr"},
            "disabled": True,
        },
    }
    result = imported(servers)
    data = tomllib.loads(to_toml(result))
    assert data["servers"]["odd"] == {
        "command": "/opt/odd tool/run",
        "args": ['say "hi"', "back\\slash", "tab\there", "new\nline", "é", "#not-a-comment"],
        "env": {"A.B": "dotted", "with space": "x", "ünï": "y", "plain_KEY-1": "z"},
        "cwd": "/srv/a",
    }
    assert data["servers"]["api"] == {
        "url": "https://api.example.com/mcp",
        "headers": {"X-Trace": "on", "Accept-Language": "fr"},
        "enabled": False,
    }


def test_a_key_ending_in_a_line_break_is_quoted_not_written_bare() -> None:
    """A bare key may not hold a line break: written bare, the config would not load."""
    result = imported({"s": {"command": "run", "env": {"FOO\n": "v", "BAR": "w"}}})
    data = tomllib.loads(to_toml(result))
    assert data["servers"]["s"]["env"] == {"FOO\n": "v", "BAR": "w"}


def test_what_draws_nothing_is_escaped_so_the_reviewer_sees_it() -> None:
    hidden = "rm\u202e-rf\u200b\x7f\x85\U000e0041"
    result = imported({"s": {"command": "run", "args": [hidden]}})
    text = to_toml(result)
    assert "\\u202e" in text and "\\u200b" in text and "\\u007f" in text
    assert "\\u0085" in text and "\\U000e0041" in text
    assert not any(c in text for c in "\u202e\u200b\x7f\x85\U000e0041")
    assert tomllib.loads(text)["servers"]["s"]["args"] == [hidden]


def test_a_hostile_source_name_or_note_cannot_write_a_line_of_toml() -> None:
    """Names from the other host's file reach the comments at the top: a line break
    in one must not end the comment and start a table."""
    evil = 'x\n[servers.evil]\ncommand = "sh"\n'
    result = imported({evil: {"command": "run", evil: 1}}, source=f"/tmp/{evil}.json")
    text = to_toml(result)
    data = tomllib.loads(text)
    assert list(data["servers"]) == ["x_servers_evil_command_sh"]
    assert "evil" not in data["servers"]
    assert all(line.startswith("#") for line in text.split("\n\n")[0].splitlines())


def test_numbers_booleans_lists_and_tables_of_host_settings_are_toml() -> None:
    result = import_text(
        json.dumps(
            {
                "mcpServers": {
                    "g": {
                        "command": "run",
                        "timeout": 1500,
                        "trust": True,
                        "includeTools": ["search", 'q"uote'],
                    }
                }
            }
        ),
        "/home/ada/.gemini/settings.json",
    )
    data = tomllib.loads(to_toml(result))["servers"]["g"]
    assert data["call_timeout"] == 1.5 and data["trusted"] is True
    assert data["tools"] == {"allow": ["search", 'q"uote']}


# -- secrets printed --


def test_printed_secrets_are_references_to_variables_it_names() -> None:
    result = imported(
        {
            "gh": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": TOKEN}},
            "api": {
                "url": f"https://api.example.com/mcp?api_key={STRIPE}",
                "headers": {"Authorization": f"Bearer {TOKEN}"},
            },
        }
    )
    text = to_toml(result)
    assert TOKEN not in text and STRIPE not in text
    data = tomllib.loads(text)["servers"]
    assert data["gh"]["env"] == {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}
    # The scheme word stays: the variable holds the token alone.
    assert data["api"]["headers"] == {"Authorization": "Bearer ${API_AUTHORIZATION}"}
    assert data["api"]["url"] == "https://api.example.com/mcp?api_key=${API_API_KEY}"
    assert "#   GITHUB_TOKEN  (servers.gh.env.GITHUB_TOKEN)" in text
    assert "#   API_AUTHORIZATION  (servers.api.headers.Authorization)" in text
    assert "#   API_API_KEY  (servers.api.url.api_key)" in text


def test_nothing_to_say_about_secrets_when_there_are_none(tmp_path: Path) -> None:
    result = imported({"s": {"command": "run", "env": {"LOG": "debug"}}})
    assert "Secrets" not in to_toml(result)
    assert move_secrets(result, tmp_path / "secrets") == {}
    assert not (tmp_path / "secrets").exists()


# -- secrets moved to files --


def test_moved_secrets_come_back_byte_for_byte_when_the_config_is_loaded(
    tmp_path: Path,
) -> None:
    result = imported(
        {
            "gh": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": TOKEN}},
            "api": {
                "url": f"https://api.example.com/mcp?api_key={STRIPE}",
                "headers": {"Authorization": f"Bearer {TOKEN}"},
            },
            "cli": {"command": "pay", "args": ["--api-key", STRIPE]},
        }
    )
    config, moved = written(result, tmp_path)
    text = config.read_text()
    assert TOKEN not in text and STRIPE not in text
    servers = load(config, env={}).servers
    assert servers["gh"].env["GITHUB_TOKEN"] == TOKEN
    assert servers["api"].headers["Authorization"] == f"Bearer {TOKEN}"
    assert servers["api"].url == f"https://api.example.com/mcp?api_key={STRIPE}"
    assert servers["cli"].args == ["--api-key", STRIPE]
    directory = secrets_dir(config)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert len(moved) == 4
    for path in moved.values():
        assert path.parent == directory
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert f"${{file:{path}}}" in text


def test_a_moved_secret_with_a_dollar_sign_is_the_secret_not_its_escape(tmp_path: Path) -> None:
    """The TOML escapes "$" as "$$"; a secret file is read as it is, so it holds the
    secret's own "$" (else the server gets a password that is not its own)."""
    password = "pa$$w0rd$"
    result = imported(
        {
            "db": {"command": "db-mcp", "env": {"DB_PASSWORD": password}},
            "api": {"url": "https://a.example.com/mcp", "headers": {"X-Api-Key": "k$y-1"}},
        }
    )
    config, moved = written(result, tmp_path)
    assert moved[("servers", "db", "env", "DB_PASSWORD")].read_text() == password + "\n"
    servers = load(config, env={}).servers
    assert servers["db"].env["DB_PASSWORD"] == password
    assert servers["api"].headers["X-Api-Key"] == "k$y-1"


def test_secret_files_stay_in_their_directory_whatever_the_key(tmp_path: Path) -> None:
    result = imported(
        {
            "s": {
                "url": "https://a.example.com/mcp",
                "headers": {"../../../etc/Token": TOKEN, "/abs/Auth": "Bearer " + TOKEN},
            }
        }
    )
    config, moved = written(result, tmp_path)
    directory = secrets_dir(config)
    assert sorted(p.name for p in moved.values()) == [
        "s.headers..._.._.._etc_Token",
        "s.headers._abs_Auth",
    ]
    assert all(p.parent == directory for p in moved.values())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.secrets", "config.toml"]


def test_the_secrets_directory_is_beside_the_config(tmp_path: Path) -> None:
    assert secrets_dir(tmp_path / "mcpd" / "config.toml") == tmp_path / "mcpd" / "config.secrets"
    assert secrets_dir(tmp_path / "servers") == tmp_path / "servers.secrets"
