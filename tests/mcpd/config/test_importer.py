"""What ``import_text`` makes of another host's file, called directly: names that
become aliases, references that become mcpd's, values that are secrets, and files
that are broken or written to do harm. The hosts' own dialects and the written TOML
are the subjects of ``test_import_hosts``, ``test_import_oauth`` and
``test_import_works``."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from mcpd.config.importer import Imported, import_text

PLAIN = "/home/ada/.config/Claude/claude_desktop_config.json"
TOKEN = "ghp_5mB2x9QvT7kLw3NcR8yZ1aHd4FjU6eP0sGiO"


@pytest.fixture(autouse=True)
def quiet_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """An importer also looks at mcpd's environment (for what a server inherits):
    none of this machine's variables may change what these tests see."""
    for name in list(os.environ):
        if name not in ("PATH", "HOME"):
            monkeypatch.delenv(name)


def imported(doc: Any, source: str = PLAIN) -> Imported:
    return import_text(json.dumps(doc), source)


def one(body: dict[str, Any], source: str = PLAIN, **top: Any) -> tuple[dict[str, Any], str]:
    """The table of one server named ``s``, and the notes as one text."""
    result = imported({"mcpServers": {"s": body}, **top}, source)
    return result.servers.get("s", {}), "\n".join(result.notes)


# -- broken and hostile files --


@pytest.mark.parametrize(
    ("body", "key", "shape"),
    [
        ({"command": "run", "env": ["TOKEN=x"]}, "env", "an object"),
        ({"command": "run", "env": "TOKEN=x"}, "env", "an object"),
        ({"command": "run", "args": "--db /tmp/x"}, "args", "a list"),
        ({"command": "run", "args": {"--db": "/tmp/x"}}, "args", "a list"),
        ({"command": "run", "args": 3}, "args", "a list"),
        (
            {"url": "https://a.example.com/mcp", "headers": "Authorization: x"},
            "headers",
            "an object",
        ),
        ({"url": "https://a.example.com/mcp", "headers": [["a", "b"]]}, "headers", "an object"),
    ],
)
def test_args_env_or_headers_of_the_wrong_shape_skip_that_server_alone(
    body: dict[str, Any], key: str, shape: str
) -> None:
    """Not a crash of ``mcpd import`` (nor of ``mcpd serve --config FILE.json``), and
    not a server started with its arguments spelt out letter by letter."""
    result = imported({"mcpServers": {"bad": body, "good": {"command": "notes"}}})
    assert result.servers == {"good": {"command": "notes"}}
    assert f"mcpServers.bad.{key}: not {shape}; skipped" in result.notes


@pytest.mark.parametrize(
    "top",
    [
        {"inputs": 5},
        {"inputs": {"id": "x"}},
        {"mcp": ["inputs"]},
        {"mcp": {"inputs": True}},
    ],
)
def test_inputs_of_the_wrong_shape_are_no_inputs(top: dict[str, Any]) -> None:
    table, notes = one({"command": "run", "env": {"K": "${input:k}"}}, **top)
    assert table["env"] == {"K": "${K}"}
    assert "the input 'k' is read from $K" in notes
