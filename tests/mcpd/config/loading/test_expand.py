"""``${...}`` in the config's strings: what each form expands to, which mistakes are
errors in the file wherever they are, which are facts about this machine that keep one
server from starting, and which expanded values are held as secrets (never shown)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.config.loading.expand import (
    MIN_SECRET,
    References,
    Unresolved,
    expand,
    expand_server,
    expand_tree,
)
from mcpd.config.tables.model import ConfigError

ENV = {"TOKEN": "tok-123456", "EMPTY": "", "HOME": "/home/someone", "SHORT": "abc"}


def secret_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "secret"
    path.write_text(text)
    os.chmod(path, 0o600)
    return str(path)


@pytest.mark.parametrize(
    ("value", "expanded"),
    [
        ("plain", "plain"),
        ("${TOKEN}", "tok-123456"),
        ("Bearer ${TOKEN}!", "Bearer tok-123456!"),
        ("$$", "$"),
        ("$${TOKEN}", "${TOKEN}"),
        ("cost: $5", "cost: $5"),
        ("${MISSING:-fallback}", "fallback"),
        ("${MISSING:-}", ""),
        ("${EMPTY:-fallback}", "fallback"),
        ("${EMPTY}", ""),
        ("${TOKEN:-fallback}", "tok-123456"),
        ("${MISSING:-a:-b}", "a:-b"),
    ],
)
def test_each_form_expands_as_the_shell_would(value: str, expanded: str) -> None:
    assert expand(value, "servers.s.env.X", ENV) == expanded


def test_a_variable_not_set_is_unresolved_and_says_how_to_give_a_default() -> None:
    with pytest.raises(Unresolved) as info:
        expand("${MISSING}", "servers.s.env.X", ENV)
    assert info.value.path == "servers.s.env.X"
    assert info.value.message == (
        "environment variable MISSING is not set (use ${MISSING:-default})"
    )


@pytest.mark.parametrize("body", ["", "1A", "A-B", "A B", ":-x", "file-x"])
def test_a_badly_written_reference_is_an_error_in_the_file(body: str) -> None:
    with pytest.raises(ConfigError) as info:
        expand(f"${{{body}}}", "servers.s.args[0]", ENV)
    assert not isinstance(info.value, Unresolved)
    assert info.value.path == "servers.s.args[0]"
    assert info.value.message == (
        "bad variable reference: a reference that is not a variable name (${NAME})"
    )


@pytest.mark.parametrize("value", ["${X", "Bearer ${TOKEN", "${HOME}${B", "$$${X"])
def test_a_reference_left_open_is_an_error_in_the_file(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        expand(value, "servers.s.args[0]", ENV)
    assert not isinstance(info.value, Unresolved)
    assert (info.value.path, info.value.message) == (
        "servers.s.args[0]",
        'bad variable reference: a "${" that no "}" closes ($$ is a "$")',
    )


def test_a_dollar_written_twice_before_a_brace_is_a_dollar_and_a_brace() -> None:
    assert expand("$${X", "servers.s.args[0]", ENV) == "${X"


def test_a_file_reference_needs_a_path() -> None:
    with pytest.raises(ConfigError, match=r"needs a path") as info:
        expand("${file:}", "servers.s.env.X", ENV)
    assert not isinstance(info.value, Unresolved)


def test_a_secret_file_is_read_without_its_newline(tmp_path: Path) -> None:
    path = secret_file(tmp_path, "from-the-file\n")
    assert expand(f"${{file:{path}}}", "servers.s.env.X", ENV) == "from-the-file"


def test_a_secret_file_that_cannot_be_read_is_unresolved(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    with pytest.raises(Unresolved, match="does not exist") as info:
        expand(f"${{file:{missing}}}", "servers.s.env.X", ENV)
    assert info.value.path == "servers.s.env.X"


# -- which values are held as secrets --


def held(value: str, path: str, env: dict[str, str] = ENV) -> list[HeldSecret]:
    found: list[HeldSecret] = []
    expand(value, path, env, found=found)
    return found


def test_a_value_from_the_environment_under_a_secret_name_is_held() -> None:
    assert held("${TOKEN}", "servers.s.args[0]") == [HeldSecret("servers.s.args[0]", "tok-123456")]


def test_a_value_under_a_key_that_names_a_secret_is_held() -> None:
    env = {"V": "value-of-v"}
    assert held("${V}", "servers.s.env.API_KEY", env) == [
        HeldSecret("servers.s.env.API_KEY", "value-of-v")
    ]


@pytest.mark.parametrize("path", ["servers.s.headers.X-Thing", "servers.s.auth.client_id"])
def test_a_value_in_a_header_or_the_auth_table_is_held(path: str) -> None:
    assert held("${V}", path, {"V": "value-of-v"}) == [HeldSecret(path, "value-of-v")]


def test_an_ordinary_value_is_not_held() -> None:
    # A folder or a port would mask every path and number where it appears.
    assert held("${V}/data", "servers.s.cwd", {"V": "/srv/data"}) == []


def test_a_plain_variable_is_not_held_even_in_a_header() -> None:
    assert held("${HOME}", "servers.s.headers.X-Home") == []
    assert held("${XDG_DATA_HOME}", "servers.s.headers.X", {"XDG_DATA_HOME": "/x/y/z"}) == []
    assert held("${STATE_DIRECTORY}", "servers.s.headers.X", {"STATE_DIRECTORY": "/var/s"}) == []


def test_a_default_written_in_the_file_is_no_secret() -> None:
    assert held("${MISSING:-written-here}", "servers.s.headers.Authorization") == []


def test_a_value_too_short_to_tell_apart_is_not_held() -> None:
    assert len(ENV["SHORT"]) < MIN_SECRET
    assert held("${SHORT}", "servers.s.headers.Authorization") == []
    exact = "x" * MIN_SECRET
    assert held("${V}", "servers.s.headers.A", {"V": exact}) == [
        HeldSecret("servers.s.headers.A", exact)
    ]


def test_a_secret_files_content_is_held_wherever_it_is_used(tmp_path: Path) -> None:
    path = secret_file(tmp_path, "file-secret\n")
    assert held(f"${{file:{path}}}", "servers.s.cwd") == [
        HeldSecret("servers.s.cwd", "file-secret")
    ]


# -- trees and servers --


def test_references_are_noted_even_when_they_cannot_be_resolved() -> None:
    refs = References()
    with pytest.raises(Unresolved, match="'rel/k' is relative"):
        expand_tree({"a": "${TOKEN}", "b": ["${X:-d}", "${file:rel/k}"]}, "daemon", ENV, refs)
    assert refs.names == {"TOKEN", "X"}
    assert refs.files == {"rel/k"}


def test_a_tree_names_the_path_of_the_string_that_failed() -> None:
    with pytest.raises(Unresolved) as info:
        expand_tree({"a": {"b": ["ok", "${NOPE}"]}, "n": 3}, "top", {})
    assert info.value.path == "top.a.b[1]"
    assert expand_tree({"a": ["${TOKEN}", 3, None, True]}, "", ENV) == {
        "a": ["tok-123456", 3, None, True]
    }


def test_a_server_that_cannot_be_expanded_keeps_its_values_and_says_why() -> None:
    body = {"command": "run", "env": {"A": "${NOPE}", "B": "${TOKEN}"}, "args": ["${ALSO_NOT}"]}
    table = expand_server(body, "servers.s", ENV)
    assert table.body == {
        "command": "run",
        "env": {"A": "${NOPE}", "B": "tok-123456"},
        "args": ["${ALSO_NOT}"],
    }
    assert table.unresolved == (
        "servers.s.env.A: environment variable NOPE is not set (use ${NOPE:-default})"
    )
    assert table.unknown == {"servers.s.env.A", "servers.s.args[0]"}
    assert table.variables == {"NOPE", "TOKEN", "ALSO_NOT"}


def test_a_server_that_expands_has_nothing_unresolved(tmp_path: Path) -> None:
    path = secret_file(tmp_path, "k")
    table = expand_server(
        {"url": "${U}", "headers": {"K": f"${{file:{path}}}"}}, "servers.s", {"U": "https://h/mcp"}
    )
    assert table.unresolved is None and table.unknown == frozenset()
    assert table.body == {"url": "https://h/mcp", "headers": {"K": "k"}}
    assert table.files == {path}


def test_a_badly_written_reference_is_an_error_even_in_a_server_table() -> None:
    with pytest.raises(ConfigError) as info:
        expand_server({"command": "${9}"}, "servers.s", ENV)
    assert not isinstance(info.value, Unresolved)
    assert info.value.path == "servers.s.command"


def test_a_disabled_server_is_not_expanded_but_its_references_are_noted() -> None:
    body = {"enabled": False, "command": "${NOPE}", "env": {"K": "${file:/run/k}", "L": "$$x"}}
    table = expand_server(body, "servers.s", {})
    assert table.body == body
    assert table.unresolved is None
    assert table.unknown == {"servers.s.command", "servers.s.env.K"}
    assert table.variables == {"NOPE"} and table.files == {"/run/k"}


def test_a_disabled_server_with_a_badly_written_reference_is_still_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        expand_server({"enabled": False, "args": ["ok", "${bad name}"]}, "servers.s", {})
    assert info.value.path == "servers.s.args[1]"


def test_nothing_is_held_for_a_disabled_server() -> None:
    found: list[HeldSecret] = []
    expand_server({"enabled": False, "headers": {"A": "${TOKEN}"}}, "servers.s", ENV, found)
    assert found == []
