"""What a loaded config answers about one server: which variables it must never get,
its time limit and the key that set it, its list limits and pin policy (its own
settings, else the daemon's), whether its text is searched for credentials; and the
error that names a key. Parsing and checking the file are ``test_load_keys``'s."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from mcpd.config.loading.load import parse_config
from mcpd.config.tables import model as cfg
from mcpd.config.tables.model import Config, ConfigError, Limit, PinPolicy

ENV = {"GH_TOKEN": "gh-secret-value", "DB_PASSWORD": "db-secret-value", "SOCK": "/run/s"}


def config(text: str, env: dict[str, str] | None = None) -> Config:
    return parse_config(tomllib.loads(text), env=ENV if env is None else env)


def test_a_server_is_withheld_the_variables_only_others_resolve() -> None:
    loaded = config(
        """
        [daemon]
        socket = "${SOCK}/mcpd.sock"
        [servers.github]
        command = "gh-mcp"
        env = { TOKEN = "${GH_TOKEN}" }
        [servers.db]
        command = "db-mcp"
        env = { PASSWORD = "${DB_PASSWORD}", ALSO = "${GH_TOKEN}" }
        [servers.plain]
        command = "notes"
        """
    )
    assert loaded.withheld_from("github") == {"DB_PASSWORD", "SOCK"}
    assert loaded.withheld_from("db") == {"SOCK"}
    assert loaded.withheld_from("plain") == {"GH_TOKEN", "DB_PASSWORD", "SOCK"}
    # A server the config does not know is withheld everything it resolves.
    assert loaded.withheld_from("stranger") == {"GH_TOKEN", "DB_PASSWORD", "SOCK"}


def test_a_variable_with_a_default_is_withheld_too() -> None:
    loaded = config(
        """
        [servers.a]
        command = "a"
        env = { KEY = "${A_KEY:-none}" }
        [servers.b]
        command = "b"
        """,
        env={},
    )
    assert loaded.withheld_from("b") == {"A_KEY"}
    assert loaded.withheld_from("a") == frozenset()


def test_a_calls_time_limit_is_the_tools_then_the_servers_then_the_daemons() -> None:
    loaded = config(
        """
        [daemon]
        call_timeout = 45.0
        [servers.slow]
        command = "slow"
        call_timeout = 120.0
        tool_timeouts = { build = 900.0 }
        [servers.plain]
        command = "plain"
        tool_timeouts = { search = 5.0 }
        """
    )
    assert loaded.call_limit("slow", "build") == (900.0, "servers.slow.tool_timeouts")
    assert loaded.call_limit("slow", "test") == (120.0, "servers.slow.call_timeout")
    assert loaded.call_limit("slow") == (120.0, "servers.slow.call_timeout")
    assert loaded.call_limit("plain", "search") == (5.0, "servers.plain.tool_timeouts")
    assert loaded.call_limit("plain", "other") == (45.0, "daemon.call_timeout")
    assert loaded.call_timeout("plain") == 45.0
    # The tool name is the server's own, matched exactly.
    assert loaded.call_limit("plain", "Search") == (45.0, "daemon.call_timeout")


def test_list_limits_are_a_servers_own_else_the_daemons_each_with_its_key() -> None:
    loaded = config(
        """
        [daemon]
        max_list_items = 500
        max_description_bytes = 4096
        [servers.big]
        command = "big"
        max_list_items = 5000
        max_item_bytes = 1024
        """
    )
    big = loaded.list_limits("big")
    assert big.items == Limit(5000, "servers.big.max_list_items")
    assert big.item_bytes == Limit(1024, "servers.big.max_item_bytes")
    assert big.description_bytes == Limit(4096, "daemon.max_description_bytes")
    assert big.list_bytes == Limit(64 * 1024 * 1024, "daemon.max_list_bytes")
    assert big.instructions_bytes.key == "daemon.max_instructions_bytes"
    # A server not (or no longer) in the config gets the daemon's.
    assert loaded.list_limits("gone").items == Limit(500, "daemon.max_list_items")


def test_a_servers_pin_setting_wins_even_when_it_turns_off_the_daemons() -> None:
    loaded = config(
        """
        [daemon]
        on_changed_item = "warn"
        on_new_item = "hold"
        hold_new_servers = true
        on_finding = "hold"
        [servers.own]
        command = "own"
        on_changed_item = "accept"
        hold_new_servers = false
        [servers.plain]
        command = "plain"
        """
    )
    assert loaded.pin_policy("own") == PinPolicy("accept", "hold", False, "hold")
    assert loaded.pin_policy("plain") == PinPolicy("warn", "hold", True, "hold")
    assert config("").pin_policy("any") == cfg.DEFAULT_POLICY


def test_redaction_is_per_server_when_set_else_the_daemons() -> None:
    text = """
        [servers.on]
        command = "on"
        redact_patterns = true
        [servers.off]
        command = "off"
        redact_patterns = false
        [servers.plain]
        command = "plain"
        """
    assert config(text).redacting() == ["on"]
    assert config("[daemon]\nredact_patterns = true\n" + text).redacting() == ["on", "plain"]


def test_a_config_error_reads_with_its_path_and_keeps_both() -> None:
    error = ConfigError("servers.notes.command", "is empty")
    assert str(error) == "servers.notes.command: is empty"
    assert (error.path, error.message) == ("servers.notes.command", "is empty")
    assert str(ConfigError("", "no servers")) == "no servers"


@pytest.mark.parametrize(
    ("alias", "ok"),
    [("notes", True), ("a-b_9", True), ("notes\n", False), ("", False), ("a.b", False)],
)
def test_the_alias_pattern_takes_no_final_line_break(alias: str, ok: bool) -> None:
    assert (cfg.ALIAS_RE.match(alias) is not None) == ok


def test_the_default_config_path_without_home_or_with_empty_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cfg.default_config_path({}) == "/.config/mcpd/config.toml"
    # An empty variable is an unset one.
    assert (
        cfg.default_config_path({"MCPD_CONFIG": "", "XDG_CONFIG_HOME": "", "HOME": "/home/ada"})
        == "/home/ada/.config/mcpd/config.toml"
    )


def test_the_default_socket_path_uses_the_given_environment_not_the_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert cfg.default_socket_path() == f"{tmp_path}/mcpd/mcpd.sock"
    assert cfg.default_socket_path({"XDG_RUNTIME_DIR": "/run/user/7"}) == (
        "/run/user/7/mcpd/mcpd.sock"
    )
