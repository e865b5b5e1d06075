"""What ``mcpd import`` writes, called directly: TOML that reads back as the servers
imported whatever names and values the other host's file held, and secrets that
leave the TOML and come back, byte for byte, when the written config is loaded."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mcpd.config.importer import Imported, import_text
from mcpd.config.importwrite import move_secrets, secrets_dir, to_toml
from mcpd.config.load import load

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


def test_a_key_ending_in_a_line_break_is_quoted_not_written_bare() -> None:
    """A bare key may not hold a line break: written bare, the config would not load."""
    result = imported({"s": {"command": "run", "env": {"FOO\n": "v", "BAR": "w"}}})
    data = tomllib.loads(to_toml(result))
    assert data["servers"]["s"]["env"] == {"FOO\n": "v", "BAR": "w"}


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
