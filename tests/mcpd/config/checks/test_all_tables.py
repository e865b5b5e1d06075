"""A config's errors beyond its types: every error of its tables in one reading, each
naming its key, and what ties the tables together checked only once they are sound,
stopping at the first."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mcpd.config.checks.all_tables import config_errors
from mcpd.config.tables.model import MAX_AUDIT_FILES, Config, DaemonConfig, NamingConfig
from mcpd.config.tables.profiles import ProfileConfig
from mcpd.config.tables.servertable import LimitsConfig, ServerConfig

DURATION = "must be positive, at most 31536000 (a year)"


def errors(**tables: Any) -> list[tuple[str, str]]:
    unexpanded = tables.pop("unexpanded", None)
    return [(e.path, e.message) for e in config_errors(Config(**tables), unexpanded)]


def daemon_errors(**keys: Any) -> list[tuple[str, str]]:
    return errors(daemon=DaemonConfig(**keys))


def test_the_defaults_hold_no_error() -> None:
    assert errors() == []


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("rw", 'must be an octal string such as "0600"'),
        ("0800", 'must be an octal string such as "0600"'),
        ("1777", "must be between 0000 and 0777"),
    ],
)
def test_a_socket_mode_is_an_octal_permission(mode: str, says: str) -> None:
    assert daemon_errors(socket_mode=mode) == [("daemon.socket_mode", says)]


@pytest.mark.parametrize("value", [0.0, -1.0, math.nan, math.inf, 4e7])
def test_a_duration_is_positive_and_at_most_a_year(value: float) -> None:
    assert daemon_errors(call_timeout=value, ask_timeout=value) == [
        ("daemon.call_timeout", DURATION),
        ("daemon.ask_timeout", DURATION),
    ]


def test_the_health_interval_alone_may_be_off() -> None:
    assert daemon_errors(health_interval=0.0) == []
    assert daemon_errors(health_interval=-1.0) == [
        ("daemon.health_interval", "must be 0 (off) or positive, at most 31536000 (a year)")
    ]


def test_a_cap_below_its_base_is_refused_but_a_bad_base_is_said_once() -> None:
    assert daemon_errors(backoff_base=10.0, backoff_cap=5.0) == [
        ("daemon.backoff_cap", "must be at least backoff_base")
    ]
    assert daemon_errors(cooldown_base=10.0, cooldown_cap=5.0) == [
        ("daemon.cooldown_cap", "must be at least cooldown_base")
    ]
    assert daemon_errors(backoff_base=-10.0, backoff_cap=5.0) == [("daemon.backoff_base", DURATION)]


def test_counts_and_sizes_have_their_floors_and_the_audit_files_a_ceiling() -> None:
    found = daemon_errors(
        queue_size=0,
        audit_files=MAX_AUDIT_FILES + 1,
        audit_max_bytes=65535,
        max_line_bytes=4095,
        result_budget_chars=99,
        max_connections_per_uid=0,
        page_size=-1,
        max_pages=0,
        max_tools=0,
    )
    assert found == [
        ("daemon.queue_size", "must be at least 1"),
        ("daemon.audit_files", f"must be at most {MAX_AUDIT_FILES}"),
        ("daemon.audit_max_bytes", "must be at least 65536"),
        ("daemon.max_line_bytes", "must be at least 4096"),
        ("daemon.result_budget_chars", "must be at least 100"),
        ("daemon.max_connections_per_uid", "must be at least 1"),
        ("daemon.page_size", "must be >= 0 (0 = everything in one page)"),
        ("daemon.max_pages", "must be at least 1"),
        ("daemon.max_tools", "must be at least 1"),
    ]
    assert (
        daemon_errors(
            audit_files=MAX_AUDIT_FILES,
            audit_max_bytes=65536,
            max_line_bytes=4096,
            result_budget_chars=100,
            page_size=0,
        )
        == []
    )


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("mcp__{alias}", "must contain {tool}"),
        ("{server}__{tool}", "unknown placeholder {server}"),
        ("{tool}{z}{a}", "unknown placeholder {a}"),
    ],
)
def test_the_naming_template_names_the_tool_and_nothing_unknown(template: str, says: str) -> None:
    assert errors(naming=NamingConfig(template=template)) == [("naming.template", says)]


@pytest.mark.parametrize(
    ("length", "wrong"), [(15, True), (16, False), (1024, False), (1025, True)]
)
def test_the_name_length_is_between_16_and_1024(length: int, wrong: bool) -> None:
    found = errors(naming=NamingConfig(max_length=length))
    assert found == ([("naming.max_length", "must be between 16 and 1024")] if wrong else [])


def test_a_group_name_the_system_cannot_take_is_not_looked_up() -> None:
    found = daemon_errors(allow_groups=["no\0such"])
    assert [path for path, _ in found] == ["daemon.allow_groups[0]"]
    assert "NUL" in found[0][1]


def test_a_group_that_does_not_exist_is_named() -> None:
    assert daemon_errors(allow_groups=["0", "mcpd-no-such-group"]) == [
        ("daemon.allow_groups[1]", "no group named 'mcpd-no-such-group'")
    ]


def test_every_table_error_comes_in_one_reading_in_table_order() -> None:
    found = errors(
        daemon=DaemonConfig(socket_mode="x", limits=LimitsConfig(open_files=3)),
        naming=NamingConfig(template="{alias}"),
        servers={"a": ServerConfig(command=""), "b b": ServerConfig(command="srv")},
    )
    assert [path for path, _ in found] == [
        "daemon.socket_mode",
        "naming.template",
        "daemon.limits.open_files",
        "servers.a.command",
        'servers."b b"',
    ]


def test_a_value_left_as_written_is_not_judged_yet() -> None:
    server = ServerConfig(url="${URL}", connect_timeout=0.0)
    found = errors(servers={"s": server}, unexpanded={"s": ["servers.s.url"]})
    assert [path for path, _ in found] == ["servers.s.connect_timeout"]
    assert [path for path, _ in errors(servers={"s": server})] == [
        "servers.s.url",
        "servers.s.connect_timeout",
    ]


def test_what_ties_the_tables_together_waits_for_sound_tables_and_stops_at_the_first() -> None:
    profiles = {
        "p": ProfileConfig(servers=["nobody"]),
        "q": ProfileConfig(servers=[]),
    }
    servers = {"s": ServerConfig(command="srv")}
    assert errors(profiles=profiles, servers=servers) == [
        ("profiles.p.servers[0]", "'nobody' is not a configured server (servers: s)")
    ]
    broken = errors(profiles=profiles, servers=servers, naming=NamingConfig(template="{alias}"))
    assert broken == [("naming.template", "must contain {tool}")]
