"""Values a config can write that mcpd could not use: each is the config's error,
naming its key, rather than a surprise when the daemon runs into it."""

from __future__ import annotations

import resource
import tomllib
from typing import Any

import pytest

from mcpd.config.loading.load import parse_config
from mcpd.config.sandboxing.per_server import applied_limits
from mcpd.config.tables.model import ConfigError
from transports.stdio.sandbox.limits import Limits

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
        parse_config(tomllib.loads(text), env={})
    return info.value.path, info.value.message


def parsed(text: str) -> Any:
    return parse_config(tomllib.loads(text), env={})


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


# -- keys that would do nothing where they are written --

STDIO = '[servers.s]\ncommand = "x"\n'
HTTP = '[servers.s]\nurl = "https://example.com/mcp"\n'


@pytest.mark.parametrize("line", ["connect_timeout = 1.0", "tls_verify = false"])
def test_an_http_key_in_a_stdio_server_is_an_error(line: str) -> None:
    key = line.split()[0]
    assert error_of(f"{STDIO}{line}\n") == (
        f"servers.s.{key}",
        "only applies to HTTP servers (with `url`)",
    )


@pytest.mark.parametrize(
    "line", ["idle_stop = 5.0", "inherit_env = false", "args = []", "env = {}", "cwd = '/'"]
)
def test_a_stdio_key_in_an_http_server_is_an_error_whatever_its_value(line: str) -> None:
    key = line.split()[0]
    assert error_of(f"{HTTP}{line}\n") == (
        f"servers.s.{key}",
        "only applies to stdio servers (with `command`)",
    )


def test_idle_stop_is_for_a_lazy_server_only() -> None:
    assert error_of(f"{STDIO}idle_stop = 5.0\n") == (
        "servers.s.idle_stop",
        'only applies with start = "lazy"',
    )
    assert parsed(f'{STDIO}start = "lazy"\nidle_stop = 5.0\n').servers["s"].idle_stop == 5.0


@pytest.mark.parametrize("line", ["http_allow_remote = true", 'http_origins = ["http://h:1"]'])
def test_an_http_endpoint_key_without_the_endpoint_is_an_error(line: str) -> None:
    key = line.split()[0]
    assert error_of(f"[daemon]\n{line}\n") == (
        f"daemon.{key}",
        "only applies with http_listen (the HTTP endpoint)",
    )
    listening = parsed(f'[daemon]\nhttp_listen = "127.0.0.1:0"\n{line}\n')
    assert listening.daemon.http_listen == "127.0.0.1:0"


def test_a_socket_mode_for_a_profile_without_its_socket_is_an_error() -> None:
    assert error_of(f'{STDIO}[profiles.p]\nsocket_mode = "0660"\n') == (
        "profiles.p.socket_mode",
        "only applies to a profile with its own socket",
    )


@pytest.mark.parametrize("uid", [-1, 4294967295, 4294967296])
def test_a_uid_no_process_can_have_is_an_error(uid: int) -> None:
    said = "must be a user id, 0 to 4294967294"
    assert error_of(f"[daemon]\nallow_uids = [0, {uid}]\n") == ("daemon.allow_uids[1]", said)
    profile = f'{STDIO}[profiles.p]\nsocket = "/run/p.sock"\nallow_uids = [{uid}]\n'
    assert error_of(profile) == ("profiles.p.allow_uids[0]", said)
    assert parsed("[daemon]\nallow_uids = [0, 4294967294]\n").daemon.allow_uids[1] == 4294967294


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("open_files = 9223372036854775807", "open_files"),
        ("processes = 9223372036854775807", "processes"),
        ("cpu = 9223372036854775807", "cpu"),
        ('memory = "1' + "0" * 400 + '"', "memory"),
        ("memory = 9223372036854775807", "memory"),
    ],
)
def test_a_limit_past_what_the_kernel_holds_is_an_error(line: str, key: str) -> None:
    path, message = error_of(f"[daemon.limits]\n{line}\n")
    assert path == f"daemon.limits.{key}"
    assert "at most 9223372036854775806" in message


def test_the_status_of_a_sandbox_says_the_open_files_a_server_is_given() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    asked = 99999999999
    given = applied_limits(Limits(open_files=asked))["open_files"]
    assert given == (asked if hard == resource.RLIM_INFINITY else min(asked, hard))
    assert applied_limits(Limits(open_files=16))["open_files"] == 16
