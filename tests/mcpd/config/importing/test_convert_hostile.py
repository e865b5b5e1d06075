"""Host files written wrong, or to do harm, in each host's format: every field mcpd reads
given each kind of value it does not take, values nested deep or long past reason, a
top level that is no object. The person importing gets a sentence naming the file or
the key, never a traceback, and the file's other servers are imported as ever."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpd.config.importing.convert import import_text
from mcpd.config.importing.served import config_from_json
from mcpd.config.tables.model import ConfigError
from tests.conftest import ROOT

# Each host's format: where its file lives, the key of its servers' table, a server
# that imports cleanly, and a stdio and an HTTP entry to spoil one key at a time.
FORMATS: dict[str, tuple[str, str, dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "claude-code": (
        "/home/ada/project/.mcp.json",
        "mcpServers",
        {"command": "notes"},
        {"command": "run", "args": ["--db", "x"], "env": {"A": "b"}, "cwd": "/srv"},
        {"type": "http", "url": "https://a.example.com/mcp", "headers": {"X-Team": "a"}},
    ),
    "vscode": (
        "/home/ada/project/.vscode/mcp.json",
        "servers",
        {"type": "stdio", "command": "notes"},
        {"type": "stdio", "command": "run", "args": ["x"], "env": {"A": "b"}},
        {"type": "http", "url": "https://a.example.com/mcp", "headers": {"X-Team": "a"}},
    ),
    "cursor": (
        "/home/ada/.cursor/mcp.json",
        "mcpServers",
        {"command": "notes"},
        {"command": "run", "args": ["x"], "env": {"A": "b"}},
        {"url": "https://a.example.com/mcp", "auth": {"CLIENT_ID": "c", "scopes": ["s"]}},
    ),
    "gemini": (
        "/home/ada/.gemini/settings.json",
        "mcpServers",
        {"command": "notes"},
        {"command": "run", "args": ["x"], "timeout": 5000, "trust": False},
        {"httpUrl": "https://a.example.com/mcp", "oauth": {"clientId": "c", "callbackPort": 7}},
    ),
    "windsurf": (
        "/home/ada/.codeium/windsurf/mcp_config.json",
        "mcpServers",
        {"command": "notes"},
        {"command": "run", "args": ["x"], "disabledTools": ["drop"]},
        {"serverUrl": "https://a.example.com/mcp", "headers": {"X-Team": "a"}},
    ),
    "zed": (
        "/home/ada/.config/zed/settings.json",
        "context_servers",
        {"command": "notes"},
        {"command": {"path": "run", "args": ["x"], "env": {"A": "b"}}},
        {"url": "https://a.example.com/mcp", "headers": {"X-Team": "a"}},
    ),
}
DEEP: Any = "end"
for _ in range(60):
    DEEP = [DEEP]
LONG = "x" * 100_000
# A value of each kind JSON has, and the hostile ones: nested deep, long, a number
# past any float, a run of digits Python will not read as a number.
WRONG: list[Any] = [5, 1.5, True, None, [], ["a", 1], {}, {"a": {"b": 1}}, "", DEEP, LONG]
WRONG += [10**400, "9" * 5000]
# The longest note these files may cause: a line, with the key's path, not the value.
LONGEST_NOTE = 400


def spoiled(entry: dict[str, Any]) -> list[tuple[str, Any]]:
    """``entry`` with each key it has, and each key of its tables, set to each wrong value."""
    out = []
    for key, value in entry.items():
        for wrong in WRONG:
            out.append((key, wrong))
        if isinstance(value, dict):
            for sub in value:
                out += [(f"{key}.{sub}", wrong) for wrong in WRONG]
    return out


def with_value(entry: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(entry))
    key, _, sub = path.partition(".")
    if sub:
        out[key][sub] = value
    else:
        out[key] = value
    return out


@pytest.mark.parametrize("host", sorted(FORMATS))
def test_any_wrong_value_in_any_key_read_is_a_note_and_the_other_servers_come_through(
    host: str,
) -> None:
    source, table, good, process, endpoint = FORMATS[host]
    for entry in (process, endpoint):
        for path, value in spoiled(entry):
            doc = {table: {"bad": with_value(entry, path, value), "good": good}}
            imported = import_text(json.dumps(doc), source)
            assert "good" in imported.servers, (host, path, value)
            long_notes = [n[:100] for n in imported.notes if len(n) > LONGEST_NOTE]
            assert not long_notes, (host, path)


@pytest.mark.timeout(30)
def test_a_megabyte_in_each_value_is_imported_in_about_the_time_it_takes_to_read() -> None:
    """Each value is judged for secrets (``exposure``): a long word costs its length, not
    its length once for each of its letters."""
    mega = "x" * 1_000_000
    stdio = {"command": "run", "args": [mega, f"--name={mega}"], "env": {"NAME": mega}}
    http = {"url": f"https://a.example.com/{mega}", "headers": {"X-Name": mega}}
    doc = {"mcpServers": {"stdio": stdio, "http": http}}
    imported = import_text(json.dumps(doc), "/home/ada/.claude.json")
    assert sorted(imported.servers) == ["http", "stdio"]


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("command", ["run", "--db"], "command: a list, not a string; skipped"),
        ("command", {"path": "run"}, "command: an object, not a string; skipped"),
        ("command", 5, "command: a number, not a string; skipped"),
        ("command", True, "command: true or false, not a string; skipped"),
        ("cwd", ["/srv"], "cwd: a list, not a string; skipped"),
        ("url", ["https://a.example.com/mcp"], "url: a list, not a string; skipped"),
        ("url", {"href": "https://a.example.com/mcp"}, "url: an object, not a string; skipped"),
    ],
)
def test_a_command_url_or_folder_that_is_no_string_skips_that_server_saying_which(
    key: str, value: Any, said: str
) -> None:
    """Not a server imported with an empty command, URL or folder, which would fail
    only once mcpd runs it."""
    body = {"command": "run", key: value} if key == "cwd" else {key: value}
    doc = {"mcpServers": {"bad": body, "good": {"command": "notes"}}}
    imported = import_text(json.dumps(doc), "/home/ada/.claude.json")
    assert imported.servers == {"good": {"command": "notes"}}
    assert f"mcpServers.bad.{said}" in imported.notes


def test_zed_and_windsurf_keys_that_become_command_or_url_are_checked_as_those() -> None:
    zed = {"context_servers": {"bad": {"command": {"path": ["run"]}}, "good": {"command": "n"}}}
    imported = import_text(json.dumps(zed), "/home/ada/.config/zed/settings.json")
    assert list(imported.servers) == ["good"]
    assert "context_servers.bad.command: a list, not a string; skipped" in imported.notes
    windsurf = {"mcpServers": {"bad": {"serverUrl": 7}, "good": {"command": "n"}}}
    imported = import_text(json.dumps(windsurf), "/home/ada/.codeium/windsurf/mcp_config.json")
    assert list(imported.servers) == ["good"]
    assert "mcpServers.bad.url: a number, not a string; skipped" in imported.notes


def test_numbers_past_what_a_port_or_a_time_limit_holds_are_notes() -> None:
    """Python reads no run of more than a few thousand digits as a number, and divides
    no whole number past the largest float."""
    oauth = {"clientId": "c", "callbackPort": "9" * 5000}
    doc = {"mcpServers": {"a": {"httpUrl": "https://a.example.com/mcp", "oauth": oauth}}}
    doc["mcpServers"]["b"] = {"command": "run", "timeout": 10**400}
    imported = import_text(json.dumps(doc), "/home/ada/.gemini/settings.json")
    assert imported.servers["a"]["auth"] == {"client_id": "c"}
    assert "call_timeout" not in imported.servers["b"]
    assert (
        "mcpServers.a.oauth.callbackPort: a string 5000 characters long is not a loopback "
        "port; not imported"
    ) in imported.notes
    assert (
        "mcpServers.b.timeout: a number 401 digits long is not a number of milliseconds; ignored"
    ) in imported.notes


def test_disabled_that_is_not_true_or_false_is_said() -> None:
    doc = {"mcpServers": {"a": {"command": "run", "disabled": "yes"}}}
    imported = import_text(json.dumps(doc), "/home/ada/.claude.json")
    assert imported.servers["a"] == {"command": "run"}
    assert "mcpServers.a.disabled: a string, not true or false; ignored" in imported.notes


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[]", "expected a JSON object at the top, not a list"),
        ("7", "expected a JSON object at the top, not a number"),
        ("null", "expected a JSON object at the top, not null"),
        ('"mcpServers"', "expected a JSON object at the top, not a string"),
        ('{"mcpServers": []}', 'no MCP servers found: "mcpServers" is a list, not an object'),
        ('{"servers": null}', 'no MCP servers found: "servers" is null, not an object'),
        (
            '{"context_servers": "zed", "mcpServers": 1}',
            'no MCP servers found: "mcpServers" is a number, not an object; '
            '"context_servers" is a string, not an object',
        ),
        (
            '{"projects": {"/home/ada/p": {"mcpServers": ["x"]}}}',
            'no MCP servers found: "projects./home/ada/p.mcpServers" is a list, not an object',
        ),
    ],
)
def test_a_file_whose_tables_are_not_objects_says_what_they_are(text: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        import_text(text, "/home/ada/.claude.json")
    assert str(caught.value) == f"/home/ada/.claude.json: {said}"


def test_a_json_config_of_the_wrong_shape_is_refused_naming_the_file() -> None:
    """``mcpd serve --config FILE.json`` reads a host's file the same way."""
    with pytest.raises(ConfigError) as caught:
        config_from_json(b'{"mcpServers": [{"command": "x"}]}', "/etc/mcpd/hosts.json")
    assert str(caught.value) == (
        '/etc/mcpd/hosts.json: no MCP servers found: "mcpServers" is a list, not an object'
    )


def test_mcpd_import_of_a_misshapen_file_says_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": [{"command": "x"}]}))
    out = subprocess.run(
        [sys.executable, "-m", "mcpd", "import", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert f'{path}: no MCP servers found: "mcpServers" is a list, not an object' in out.stderr
