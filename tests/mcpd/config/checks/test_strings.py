"""The config's strings that reach a system call or the wire: what the kernel or a
connection cannot take is the config's error, naming the key, never the text of a
value that may be a secret."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.config.checks.strings import (
    MAX_SOCKET_PATH,
    NUL,
    control_named,
    daemon_string_errors,
    server_string_errors,
    unpassable,
    url_errors,
)
from mcpd.config.tables.model import Config, DaemonConfig
from mcpd.config.tables.profiles import ProfileConfig
from mcpd.config.tables.servertable import ServerConfig

LONE = "\ud800"
NO_ENCODING = "contains a character that has no encoding (a lone surrogate)"
HEADER_VALUE = (
    "a header value is visible ASCII, with spaces or tabs only between characters "
    "(no CR, LF, NUL or other control characters)"
)


def server_errors(**keys: Any) -> list[tuple[str, str]]:
    server = ServerConfig(**{"command": "srv", **keys})
    return [(e.path, e.message) for e in server_string_errors("servers.s", server)]


def daemon_errors(**keys: Any) -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in daemon_string_errors(Config(**keys))]


def test_the_system_takes_any_text_but_a_nul_or_a_lone_surrogate() -> None:
    assert unpassable("ünïcode and spaces\t\n") is None
    assert unpassable("a\0b") == NUL
    assert unpassable(f"a{LONE}") == NO_ENCODING


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("plain", None),
        ("ab\ncd", "a line feed at character 3"),
        ("\rx", "a carriage return at character 1"),
        ("x\ty\0", "a tab at character 2"),
        ("12\0", "a NUL at character 3"),
        ("x\x1b[2J", "the control character U+001B at character 2"),
        ("del\x7f", "the control character U+007F at character 4"),
    ],
)
def test_the_first_control_character_is_named_by_place_not_shown(
    text: str, named: str | None
) -> None:
    assert control_named(text) == named


@pytest.mark.parametrize(
    "url", ["https://x/a b", "https://x/\n", "https://x/\x7f", "http://x/\u2003"]
)
def test_a_url_no_request_line_can_carry_is_refused(url: str) -> None:
    assert [(e.path, e.message) for e in url_errors("servers.s.url", url)] == [
        ("servers.s.url", "contains a control character or a space (percent-encode it)")
    ]


def test_a_url_with_encoded_spaces_passes() -> None:
    assert list(url_errors("servers.s.url", "https://x/a%20b?q=1")) == []


def test_each_string_handed_to_a_process_names_its_key() -> None:
    found = server_errors(
        command="s\0rv",
        args=["ok", f"x{LONE}"],
        cwd="/srv/\0",
        read=["/ok", "/a\0"],
        write=["/b\0"],
    )
    assert found == [
        ("servers.s.command", NUL),
        ("servers.s.args[1]", NO_ENCODING),
        ("servers.s.cwd", NUL),
        ("servers.s.read[1]", NUL),
        ("servers.s.write[0]", NUL),
    ]


def test_an_environment_needs_names_the_kernel_can_set() -> None:
    found = server_errors(env={"": "x", "A=B": "x", "GOOD": "fine", "BAD": "v\0", "X\0": "v"})
    assert found == [
        ("servers.s.env", "a variable name cannot be empty"),
        ("servers.s.env.A=B", 'a variable name cannot contain "="'),
        ("servers.s.env.BAD", NUL),
        ("servers.s.env.X\\x00", NUL),
    ]


def test_an_empty_working_directory_is_refused() -> None:
    assert server_errors(cwd="") == [("servers.s.cwd", "is empty")]
    assert server_errors(cwd="/srv") == []


def test_headers_are_tokens_with_plain_values_and_a_secret_value_is_not_repeated() -> None:
    secret = "Bearer s3cr3t\r\nX-Evil: 1"
    found = server_errors(
        headers={"Authorization": secret, "X Space": "v", "X-Ok": "fine", "X-Empty": ""}
    )
    assert found == [
        ("servers.s.headers.Authorization", HEADER_VALUE),
        (
            "servers.s.headers.X Space",
            "a header name is letters, digits and !#$%&'*+-.^_`|~ only (no spaces)",
        ),
    ]
    assert not any("s3cr3t" in message for _, message in found)


def test_a_header_name_with_a_line_break_is_shown_escaped() -> None:
    ((path, _),) = server_errors(headers={"X-A\nB": "v"})
    assert path == "servers.s.headers.X-A\\nB"


def test_daemon_and_profile_paths_are_absolute_and_sockets_fit_an_address() -> None:
    fits = "/" + "s" * (MAX_SOCKET_PATH - 1)
    too_long = fits + "s"
    found = daemon_errors(
        daemon=DaemonConfig(socket="run/mcpd.sock", state_dir=""),
        profiles={
            "fits": ProfileConfig(socket=fits),
            "long": ProfileConfig(socket=too_long),
            "home": ProfileConfig(socket="~/mcpd.sock"),
        },
    )
    assert found == [
        ("daemon.socket", "must be an absolute path (~ is not expanded here)"),
        ("daemon.state_dir", "is empty (leave the key out for the default)"),
        (
            "profiles.long.socket",
            f"is {MAX_SOCKET_PATH + 1} bytes long; the path of a Unix socket holds at most "
            f"{MAX_SOCKET_PATH}",
        ),
        ("profiles.home.socket", "must be an absolute path (~ is not expanded here)"),
    ]


def test_a_long_state_directory_is_no_socket_and_passes() -> None:
    assert daemon_errors(daemon=DaemonConfig(state_dir="/" + "d" * 300)) == []


def test_a_path_or_group_the_system_cannot_take_is_named_once() -> None:
    found = daemon_errors(
        daemon=DaemonConfig(socket="/run/\0", allow_groups=["staff", "wh\0eel"]),
        profiles={"p": ProfileConfig(allow_groups=[f"g{LONE}"])},
    )
    assert found == [
        ("daemon.socket", NUL),
        ("daemon.allow_groups[1]", NUL),
        ("profiles.p.allow_groups[0]", NO_ENCODING),
    ]
