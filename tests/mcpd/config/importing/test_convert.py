"""What ``import_text`` makes of another host's file, called directly: names that
become aliases, references that become mcpd's, values that are secrets, and files
that are broken or written to do harm. The hosts' own dialects and the written TOML
are the subjects of ``test_hosts``, ``test_convert_oauth`` and
``test_write_works``."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpd.config.importing.convert import Imported, import_file, import_text
from mcpd.config.importing.served import config_from_json
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import ConfigError
from tests.conftest import ROOT

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


# -- names --


def test_names_become_aliases_and_a_clash_gets_a_number_not_a_lost_server() -> None:
    result = imported(
        {
            "mcpServers": {
                "my notes": {"command": "notes"},
                "my.notes": {"command": "notes", "args": ["--other"]},
                "my+notes": {"command": "notes"},
                "": {"command": "a"},
                "日本": {"command": "b"},
            }
        }
    )
    assert result.servers == {
        "my_notes": {"command": "notes"},
        "my_notes_2": {"command": "notes", "args": ["--other"]},
        "server": {"command": "a"},
        "server_2": {"command": "b"},
    }
    assert "mcpServers.my notes: the name 'my notes' became the alias 'my_notes'" in result.notes
    assert "mcpServers.my.notes: another server named 'my_notes'; imported as my_notes_2" in (
        result.notes
    )
    assert "mcpServers.my+notes: the same server as 'my_notes' again; kept once" in result.notes


def test_every_project_of_claude_code_is_read_and_runs_in_its_folder() -> None:
    """Claude Code starts a project's servers in the project's folder: a relative
    script there is found only if mcpd does the same."""
    result = imported(
        {
            "mcpServers": {"notes": {"command": "notes"}},
            "projects": {
                "/home/ada/a": {"mcpServers": {"notes": {"command": "notes"}}},
                "/home/ada/b": {"mcpServers": {"notes": {"command": "notes", "args": ["b"]}}},
                "/home/ada/c": {"allowedTools": []},
                "/home/ada/d": "not a project",
                "/home/ada/e": {"mcpServers": {"x": {"command": "x", "cwd": "/srv"}}},
            },
        },
        "/home/ada/.claude.json",
    )
    assert result.servers == {
        "notes": {"command": "notes"},
        "notes_2": {"command": "notes", "cwd": "/home/ada/a"},
        "notes_3": {"command": "notes", "args": ["b"], "cwd": "/home/ada/b"},
        "x": {"command": "x", "cwd": "/srv"},
    }


def test_a_name_shared_by_many_projects_is_numbered_without_starting_over() -> None:
    projects = {f"/p/{i}": {"mcpServers": {"fs": {"command": "fs"}}} for i in range(1000)}
    result = imported({"projects": projects}, "/home/ada/.claude.json")
    assert len(result.servers) == 1000
    assert result.servers["fs_1000"] == {"command": "fs", "cwd": "/p/999"}


# -- values --


def test_references_become_mcpds_and_a_literal_dollar_stays_literal() -> None:
    table, notes = one(
        {
            "command": "run",
            "args": [
                "${env:API_BASE}/v1",
                "${userHome}/notes",
                "a${pathSeparator}b",
                "price: $5",
                "$HOME",
                "${NAME:-fallback}",
                "${file:/run/keys/notes}",
                "${config:editor.font}",
            ],
        }
    )
    assert table["args"] == [
        "${API_BASE}/v1",
        "${HOME}/notes",
        "a/b",
        "price: $$5",
        "$$HOME",
        "${NAME:-fallback}",
        "${file:/run/keys/notes}",
        "${CONFIG_EDITOR_FONT}",
    ]
    assert "args[7]: ${config:editor.font} has no meaning here; read from $CONFIG_EDITOR_FONT" in (
        notes
    )


def test_gemini_reads_a_bare_dollar_name_as_a_variable_and_others_do_not() -> None:
    args = ["$HOME/data", "$1", "cost $"]
    gemini, _ = one({"command": "run", "args": args}, "/home/ada/.gemini/settings.json")
    assert gemini["args"] == ["${HOME}/data", "$$1", "cost $$"]
    common, _ = one({"command": "run", "args": args})
    assert common["args"] == ["$$HOME/data", "$$1", "cost $$"]


def test_an_input_is_a_variable_named_after_it_and_its_prompt_is_quoted() -> None:
    table, notes = one(
        {"command": "run", "env": {"KEY": "${input:api-key}", "N": "${input:2fa}"}},
        inputs=[
            {"id": "api-key", "type": "promptString", "description": "Your API key"},
            {"id": 7},
            "not an input",
        ],
    )
    assert table["env"] == {"KEY": "${API_KEY}", "N": "${_2FA}"}
    assert "env.KEY: the input 'api-key' (Your API key) is read from $API_KEY" in notes
    assert "env.N: the input '2fa' is read from $_2FA" in notes


def test_the_workspace_folder_is_the_project_of_a_workspace_file(tmp_path: Path) -> None:
    project = tmp_path / "price$list"
    source = project / ".vscode" / "mcp.json"
    body = {"command": "run", "args": ["${workspaceFolder}/db", "${workspaceFolderBasename}"]}
    result = imported({"servers": {"s": body}}, str(source))
    table = result.servers["s"]
    # The folder's own "$" is escaped so mcpd does not read it as a reference.
    escaped = str(project.resolve()).replace("$", "$$")
    assert table["args"] == [f"{escaped}/db", "price$$list"]
    # A project's servers ran in its folder under the host.
    assert table["cwd"] == escaped
    # Elsewhere there is no workspace: the folder comes from a variable, and the
    # server runs where mcpd puts it.
    table, notes = one(body)
    assert table["args"] == ["${WORKSPACE_FOLDER}/db", "${WORKSPACE_FOLDER}"]
    assert "cwd" not in table
    assert "${workspaceFolder} is read from $WORKSPACE_FOLDER" in notes


def test_a_value_that_is_not_a_string_is_written_as_json_or_emptied_and_said() -> None:
    table, notes = one({"command": "run", "args": [8080, True, 1.5, None, {"a": 1}, ["x"]]})
    assert table["args"] == ["8080", "true", "1.5", "", "", ""]
    assert "args[3]: NoneType where a string belongs; emptied" in notes
    assert "args[4]: dict where a string belongs; emptied" in notes
    assert "args[5]: list where a string belongs; emptied" in notes


def test_settings_mcpd_has_no_use_for_are_named_and_disabled_is_kept() -> None:
    table, notes = one(
        {
            "command": "run",
            "type": "websocket",
            "disabled": True,
            "alwaysAllow": ["read"],
            "envFile": "/home/ada/.env",
            "colour": "blue",
        }
    )
    assert table == {"command": "run", "enabled": False}
    assert "mcpServers.s.type: not a transport mcpd knows; ignored" in notes
    assert "mcpServers.s.alwaysAllow: a setting of the other host; not imported" in notes
    assert "mcpServers.s.envFile: not read; put its variables in [servers.s.env]" in notes
    assert "mcpServers.s.colour: unknown key; not imported" in notes


def test_an_sse_url_keeps_the_old_transport() -> None:
    table, _ = one({"type": "sse", "url": "https://events.example.com/stream"})
    assert table == {"url": "https://events.example.com/stream", "transport": "sse"}


def test_entries_mcpd_cannot_run_are_skipped_with_the_reason() -> None:
    result = imported(
        {
            "mcpServers": {
                "bare": {"type": "stdio"},
                "text": "npx notes",
                "ok": {"command": "notes"},
            },
            "servers": ["not", "an", "object"],
        }
    )
    assert list(result.servers) == ["ok"]
    assert 'mcpServers.bare: neither "command" nor "url"; skipped' in result.notes
    assert "mcpServers.text: not an object; skipped" in result.notes
    assert "servers: not an object; skipped" in result.notes


# -- secrets --


def test_secrets_are_found_by_name_and_by_shape_and_a_reference_is_none() -> None:
    result = imported(
        {
            "mcpServers": {
                "gh": {
                    "command": "github-mcp",
                    "env": {
                        "GITHUB_TOKEN": "short",
                        "SETTING": TOKEN,
                        "LOG_LEVEL": "debug",
                        "API_KEY": "${env:MY_KEY}",
                    },
                },
                "api": {
                    "url": "https://api.example.com/mcp",
                    "headers": {
                        "Authorization": "Bearer sk-live-1",
                        "X-Trace": "on",
                        "X-Api-Key": "Bearer ${env:API}",
                    },
                },
            }
        }
    )
    assert result.secrets == {
        ("servers", "gh", "env", "GITHUB_TOKEN"): "GITHUB_TOKEN",
        ("servers", "gh", "env", "SETTING"): "SETTING",
        ("servers", "api", "headers", "Authorization"): "API_AUTHORIZATION",
    }
    # The tables keep the real values: the writer replaces what ``secrets`` names.
    assert result.servers["gh"]["env"]["SETTING"] == TOKEN


def test_two_servers_with_the_same_variable_and_different_secrets_get_two_variables() -> None:
    result = imported(
        {
            "mcpServers": {
                "work": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "work-secret"}},
                "home": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "home-secret"}},
                "copy": {"command": "gh-mcp2", "env": {"GITHUB_TOKEN": "work-secret"}},
            }
        }
    )
    assert result.secrets == {
        ("servers", "work", "env", "GITHUB_TOKEN"): "GITHUB_TOKEN",
        ("servers", "home", "env", "GITHUB_TOKEN"): "HOME_GITHUB_TOKEN",
        # The same secret is one variable, whoever holds it.
        ("servers", "copy", "env", "GITHUB_TOKEN"): "GITHUB_TOKEN",
    }


def test_a_server_that_seems_to_rely_on_mcpds_environment_inherits_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GCLOUD_PROJECT", "demo")
    monkeypatch.setenv("UNRELATED_THING", "x")
    table, notes = one({"command": "/usr/bin/gcloud-mcp", "args": ["--log", "${LOG_DIR}"]})
    assert table["inherit_env"] == ["GCLOUD_PROJECT"]
    assert "inherits GCLOUD_PROJECT from mcpd's environment (servers.s.inherit_env)" in notes


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


def test_a_header_mcpd_writes_itself_is_left_out_and_said() -> None:
    body = {"url": "https://a.example.com/mcp", "headers": {"Accept": "*/*", "X-Team": "a"}}
    result = imported({"mcpServers": {"remote": body}})
    assert result.servers["remote"]["headers"] == {"X-Team": "a"}
    assert "mcpServers.remote.headers.Accept: a header mcpd writes itself; not imported" in (
        result.notes
    )


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


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{", "not valid JSON"),
        ("[]", "expected a JSON object at the top"),
        ('"mcpServers"', "expected a JSON object at the top"),
        ('{"mcpServers": {}}', "no MCP servers found"),
        ('{"mcpServers": []}', "no MCP servers found"),
        ('{"other": {"mcpServers": {"s": {"command": "x"}}}}', "no MCP servers found"),
        ('{"mcpServers": {"s": {"command": "\\udc80"}}}', "'\\udc80', half of a character"),
    ],
)
def test_a_file_that_holds_no_servers_is_a_config_error_naming_it(text: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        import_text(text, "/tmp/host.json")
    assert str(caught.value).startswith("/tmp/host.json: ")
    assert words in str(caught.value)


def test_import_file_names_a_file_it_cannot_read_or_decode(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read .*missing\.json.*No such file"):
        import_file(tmp_path / "missing.json")
    latin = tmp_path / "latin.json"
    latin.write_bytes('{"mcpServers": {"caf\xe9": {"command": "x"}}}'.encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin\.json: not UTF-8 text"):
        import_file(latin)
    with pytest.raises(ConfigError, match="cannot read"):
        import_file(tmp_path)


def test_comments_and_trailing_commas_are_read() -> None:
    text = '// VS Code\n{"servers": {"s": {"command": "run", /* why */ "args": ["a",],},},}\n'
    assert import_text(text, "/home/ada/.vscode/mcp.json").servers["s"]["args"] == ["a"]


# -- a JSON file used as mcpd's config --


def test_config_from_json_gives_servers_that_parse_and_logs_the_notes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    doc = {"mcpServers": {"my notes": {"command": "notes", "alwaysAllow": ["x"]}}}
    with caplog.at_level(logging.WARNING, logger="mcpd.config"):
        data = config_from_json(json.dumps(doc).encode(), "/etc/mcpd/hosts.json")
    assert data == {"servers": {"my_notes": {"command": "notes"}}}
    assert parse_config(data, env={}).servers["my_notes"].command == "notes"
    logged = [r.getMessage() for r in caplog.records]
    assert "/etc/mcpd/hosts.json: mcpServers.my notes: the name 'my notes' became" in logged[0]
    with pytest.raises(ConfigError, match=r"hosts\.json: not UTF-8 text"):
        config_from_json(b'{"mcpServers": {"\xff": {}}}', "/etc/mcpd/hosts.json")


@pytest.mark.parametrize("command", [["check-config"], ["serve", "--log", "stderr"]])
def test_a_json_config_whose_every_server_is_skipped_is_refused_saying_why(
    tmp_path: Path, command: list[str]
) -> None:
    """Not "OK, 0 server(s)": the same mistakes in TOML are config errors."""
    path = tmp_path / "hosts.json"
    doc = {"mcpServers": {"a": {"command": "x", "args": "oops"}, "b": {"comand": "y"}}}
    path.write_text(json.dumps(doc))
    out = subprocess.run(
        [sys.executable, "-m", "mcpd", *command, "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MCPD_SOCKET": str(tmp_path / "s.sock")},
    )
    assert out.returncode == 78, out
    said = out.stderr.splitlines()
    assert f"config error: {path}: none of its servers can be used" in said[0]
    assert said[1:] == [
        f"    | {path}: mcpServers.a.args: not a list; skipped",
        f'    | {path}: mcpServers.b: neither "command" nor "url" '
        '(is "comand" meant to be "command"?); skipped',
    ]


@pytest.mark.parametrize("command", [["check-config"], ["serve", "--log", "stderr"]])
def test_a_json_config_with_a_key_misspelt_is_refused_as_toml_is(
    tmp_path: Path, command: list[str]
) -> None:
    # Taken with a note, the server would run without its arguments.
    path = tmp_path / "hosts.json"
    body = {"command": "x", "arg": ["-m", "notes"], "enabled": True, "alwaysAllow": []}
    path.write_text(json.dumps({"mcpServers": {"a": body, "b": {"command": "y", "envs": {}}}}))
    out = subprocess.run(
        [sys.executable, "-m", "mcpd", *command, "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MCPD_SOCKET": str(tmp_path / "s.sock")},
    )
    assert out.returncode == 78, out
    said = out.stderr.splitlines()
    assert said[0].endswith(
        f'config error: {path}: mcpServers.a.arg: unknown key; did you mean "args"?'
    )
    assert said[1:] == [f'    | {path}: mcpServers.b.envs: unknown key; did you mean "env"?']


def test_a_key_of_the_hosts_own_is_noted_and_a_slip_is_named() -> None:
    result = imported({"mcpServers": {"a": {"command": "x", "arg": ["-v"], "enabled": True}}})
    assert result.notes == [
        'mcpServers.a.arg: unknown key; did you mean "args"? (not imported)',
        "mcpServers.a.enabled: unknown key; not imported",
    ]
    assert result.misspelt == ['mcpServers.a.arg: unknown key; did you mean "args"?']
