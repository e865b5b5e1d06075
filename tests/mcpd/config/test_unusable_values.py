"""Values a config can write that mcpd could not use: each is the config's error,
naming its key, rather than a surprise when the daemon runs into it."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from mcpd.config.load import parse
from mcpd.config.model import ConfigError

A_YEAR = "must be positive, at most 31536000 (a year)"
DAEMON_DURATIONS = (
    "call_timeout",
    "max_call_time",
    "startup_deadline",
    "probe_timeout",
    "list_timeout",
    "queue_timeout",
    "backoff_base",
    "backoff_cap",
    "crash_window",
    "stable_after",
    "cooldown_base",
    "cooldown_cap",
    "ask_timeout",
    "http_header_timeout",
    "first_message_timeout",
)


def error_of(text: str) -> tuple[str, str]:
    with pytest.raises(ConfigError) as info:
        parse(tomllib.loads(text), env={})
    return info.value.path, info.value.message


def parsed(text: str) -> Any:
    return parse(tomllib.loads(text), env={})


@pytest.mark.parametrize("key", DAEMON_DURATIONS)
@pytest.mark.parametrize("value", ["inf", "1e13", "31536001"])
def test_a_daemon_duration_past_a_year_is_an_error_naming_its_key(key: str, value: str) -> None:
    # The caps are set with their bases, so that the error is about the key itself.
    text = f"[daemon]\n{key} = {value}\n"
    for base, cap in (("backoff_base", "backoff_cap"), ("cooldown_base", "cooldown_cap")):
        if key == base:
            text += f"{cap} = {value}\n"
    assert error_of(text) == (f"daemon.{key}", A_YEAR)


@pytest.mark.parametrize("key", DAEMON_DURATIONS)
def test_a_daemon_duration_of_a_year_is_taken(key: str) -> None:
    keys = dict.fromkeys((key, "backoff_cap", "cooldown_cap"), 31536000)
    text = "[daemon]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items())
    assert getattr(parsed(text).daemon, key) == 31536000


@pytest.mark.parametrize("value", ["inf", "1e13", "-1", "nan"])
def test_the_health_interval_is_off_or_at_most_a_year(value: str) -> None:
    assert error_of(f"[daemon]\nhealth_interval = {value}\n") == (
        "daemon.health_interval",
        "must be 0 (off) or positive, at most 31536000 (a year)",
    )
    assert parsed("[daemon]\nhealth_interval = 0\n").daemon.health_interval == 0


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ("call_timeout = inf", "call_timeout"),
        ("connect_timeout = 1e13", "connect_timeout"),
        ("idle_stop = inf", "idle_stop"),
        ("tool_timeouts = { slow = 1e400 }", "tool_timeouts.slow"),
    ],
)
def test_a_server_duration_past_a_year_is_an_error_naming_its_key(body: str, key: str) -> None:
    head = '[servers.s]\nurl = "https://example.com/mcp"\n'
    if key == "idle_stop":
        head = '[servers.s]\ncommand = "x"\nstart = "lazy"\n'
    assert error_of(f"{head}{body}\n") == (f"servers.s.{key}", A_YEAR)


# -- paths --


@pytest.mark.parametrize("key", ["socket", "state_dir"])
@pytest.mark.parametrize("path", ["~/mcpd", "mcpd/here", "./x"])
def test_a_daemon_path_that_is_not_absolute_is_an_error(key: str, path: str) -> None:
    assert error_of(f'[daemon]\n{key} = "{path}"\n') == (
        f"daemon.{key}",
        "must be an absolute path (~ is not expanded here)",
    )


@pytest.mark.parametrize("key", ["socket", "state_dir"])
def test_an_empty_daemon_path_is_an_error_not_the_default(key: str) -> None:
    assert error_of(f'[daemon]\n{key} = ""\n') == (
        f"daemon.{key}",
        "is empty (leave the key out for the default)",
    )


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("~/p.sock", "must be an absolute path (~ is not expanded here)"),
        ("", "is empty (leave the key out for the default)"),
    ],
)
def test_a_profile_socket_must_be_an_absolute_path(path: str, said: str) -> None:
    assert error_of(f'[profiles.p]\nsocket = "{path}"\n') == ("profiles.p.socket", said)


def test_a_socket_path_longer_than_a_unix_socket_holds_is_an_error() -> None:
    fits = "/" + "s" * 106
    assert parsed(f'[daemon]\nsocket = "{fits}"\n').daemon.socket == fits
    long = "/" + "s" * 107
    assert error_of(f'[daemon]\nsocket = "{long}"\n') == (
        "daemon.socket",
        "is 108 bytes long; the path of a Unix socket holds at most 107",
    )
    assert error_of(f'[profiles.p]\nsocket = "{long}"\n')[0] == "profiles.p.socket"
