"""How agents reach mcpd, as the config says it: the HTTP listener's address and origins,
the profiles' servers, patterns, names and sockets. Each mistake is named by its key path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcpd.config.checks.endpoints import (
    check_template,
    is_loopback,
    parse_listen,
    validate_http,
    validate_profiles,
)
from mcpd.config.tables.model import Config, ConfigError, DaemonConfig
from mcpd.config.tables.profiles import Patterns, ProfileConfig
from mcpd.config.tables.servertable import ServerConfig


def error_of(call: Any, *args: Any) -> tuple[str, str]:
    with pytest.raises(ConfigError) as info:
        call(*args)
    return info.value.path, info.value.message


# -- daemon.http_listen --


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("127.0.0.1:8765", "127.0.0.1", 8765),
        ("localhost:0", "localhost", 0),
        ("[::1]:65535", "::1", 65535),
        ("0.0.0.0:80", "0.0.0.0", 80),
    ],
)
def test_a_listen_address_is_a_host_and_a_port(text: str, host: str, port: int) -> None:
    assert parse_listen(text) == (host, port)


@pytest.mark.parametrize(
    "text",
    ["8765", ":8765", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:http", "[::1]"],
)
def test_a_listen_address_without_host_and_port_is_named(text: str) -> None:
    assert error_of(parse_listen, text) == (
        "daemon.http_listen",
        'is not HOST:PORT; write a loopback address and a port, such as "127.0.0.1:8765"',
    )


# str.isdigit() is true of digits int() does not read (²) or reads as another port (٣):
# such a port must be the config error, not a traceback or a port nobody wrote.
@pytest.mark.parametrize("port", ["\u00b2", "\u2460", "\u0663"])
def test_a_port_of_digits_other_than_ascii_is_a_config_error(port: str) -> None:
    path, _ = error_of(parse_listen, f"127.0.0.1:{port}")
    assert path == "daemon.http_listen"


def test_a_listen_address_error_names_the_key_it_came_from() -> None:
    path, _ = error_of(parse_listen, "nope", "mcpd serve --listen")
    assert path == "mcpd serve --listen"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("192.0.2.1", False),
        ("::", False),
        ("localhost.example.test", False),
        ("127.0.0.1.nip.example", False),
    ],
)
def test_only_loopback_hosts_count_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_remote_listener_needs_http_allow_remote() -> None:
    path, message = error_of(validate_http, DaemonConfig(http_listen="0.0.0.0:8765"))
    assert path == "daemon.http_listen"
    assert "the host is not a loopback address" in message and "0.0.0.0" not in message
    assert "http_allow_remote = true" in message
    validate_http(DaemonConfig(http_listen="0.0.0.0:8765", http_allow_remote=True))
    validate_http(DaemonConfig(http_listen="[::1]:8765"))
    validate_http(DaemonConfig())


@pytest.mark.parametrize(
    "origin", ["localhost:3000", "http://localhost:3000/", "http://a b", "file:///x", ""]
)
def test_an_origin_that_is_not_scheme_and_host_is_named(origin: str) -> None:
    d = DaemonConfig(http_origins=["http://localhost:3000", origin])
    path, message = error_of(validate_http, d)
    assert path == "daemon.http_origins[1]"
    assert "must be an origin" in message


@pytest.mark.parametrize(
    ("origin", "bare"),
    [
        ("http://localhost:80", "http://localhost"),
        ("https://app.example:443", "https://app.example"),
        ("http://[::1]:80", "http://[::1]"),
    ],
)
def test_an_origin_with_its_schemes_default_port_is_refused(origin: str, bare: str) -> None:
    path, message = error_of(validate_http, DaemonConfig(http_origins=[origin]))
    assert path == "daemon.http_origins[0]"
    assert "never match" in message
    assert f"write it as '{bare}'" in message


@pytest.mark.parametrize(
    "origin", ["http://localhost:443", "https://localhost:80", "http://[::1]", "http://h:8080"]
)
def test_an_origin_with_another_port_or_none_is_accepted(origin: str) -> None:
    validate_http(DaemonConfig(http_listen="127.0.0.1:0", http_origins=[origin]))


def test_origins_are_checked_even_without_a_listener() -> None:
    path, _ = error_of(validate_http, DaemonConfig(http_origins=["nope"]))
    assert path == "daemon.http_origins[0]"


# -- naming templates --


def test_a_template_needs_the_tool_and_no_other_placeholder() -> None:
    check_template("t", "{alias}.{tool}")
    check_template("t", "{tool}")
    assert error_of(check_template, "t", "{alias}") == ("t", "must contain {tool}")
    assert error_of(check_template, "t", "{tool}_{zeta}_{server}") == (
        "t",
        "unknown placeholder {server}",
    )


# -- profiles --


def config(tmp_path: Path, profiles: dict[str, ProfileConfig], **keys: Any) -> Config:
    servers = {
        alias: ServerConfig(command="/bin/true") for alias in ("notes", "git", "github", "web")
    }
    daemon = DaemonConfig(socket=str(tmp_path / "mcpd.sock"))
    return Config(daemon=daemon, servers=servers, profiles=profiles, **keys)


def profile_error(tmp_path: Path, **profiles: ProfileConfig) -> tuple[str, str]:
    return error_of(validate_profiles, config(tmp_path, profiles))


def test_a_valid_profile_passes(tmp_path: Path) -> None:
    validate_profiles(
        config(
            tmp_path,
            {
                "coding": ProfileConfig(
                    servers=["git*", "notes"],
                    tools=Patterns(allow=["git/*", "gith?b/create_*"], deny=["notes/delete"]),
                    pinned=["notes/search"],
                    template="{alias}_{tool}",
                    max_length=16,
                    max_tools=1,
                    socket=str(tmp_path / "coding.sock"),
                    socket_mode="0660",
                    allow_groups=["root", "1234"],
                    allow_servers=["web", "g*"],
                ),
                "read-only_2": ProfileConfig(),
            },
        )
    )


def test_a_profile_name_outside_the_allowed_characters_is_named(tmp_path: Path) -> None:
    assert profile_error(tmp_path, **{"a b": ProfileConfig()}) == (
        "profiles.a b",
        "a profile name must be made of A-Z a-z 0-9 _ -",
    )


def test_a_profile_with_no_servers_is_told_how_to_mean_all(tmp_path: Path) -> None:
    assert profile_error(tmp_path, p=ProfileConfig(servers=[])) == (
        "profiles.p.servers",
        'is empty; use ["*"] for every server',
    )


def test_a_server_a_profile_names_must_be_configured(tmp_path: Path) -> None:
    assert profile_error(tmp_path, p=ProfileConfig(servers=["notes", "gti"])) == (
        "profiles.p.servers[1]",
        "'gti' is not a configured server (servers: git, github, notes, web)",
    )
    assert profile_error(tmp_path, p=ProfileConfig(servers=["x*"])) == (
        "profiles.p.servers[0]",
        "'x*' matches no server (servers: git, github, notes, web)",
    )
    assert profile_error(tmp_path, p=ProfileConfig(servers=[""])) == (
        "profiles.p.servers[0]",
        "is empty",
    )


def test_server_globs_are_case_sensitive(tmp_path: Path) -> None:
    path, _ = profile_error(tmp_path, p=ProfileConfig(servers=["GIT*"]))
    assert path == "profiles.p.servers[0]"


@pytest.mark.parametrize(
    ("profile", "path"),
    [
        (ProfileConfig(servers=["git"], tools=Patterns(allow=["notes/*"])), "tools.allow[0]"),
        (ProfileConfig(servers=["git"], prompts=Patterns(deny=["x", "web/*"])), "prompts.deny[1]"),
        (ProfileConfig(servers=["git"], resources=Patterns(allow=["n*/x"])), "resources.allow[0]"),
        (ProfileConfig(servers=["git"], pinned=["github/x"]), "pinned[0]"),
    ],
)
def test_a_pattern_naming_a_server_outside_the_profile_is_named(
    tmp_path: Path, profile: ProfileConfig, path: str
) -> None:
    got_path, message = profile_error(tmp_path, p=profile)
    assert got_path == f"profiles.p.{path}"
    assert message.endswith("is not one of this profile's servers (git)")


def test_a_pattern_with_a_server_glob_that_matches_one_of_the_profiles_passes(
    tmp_path: Path,
) -> None:
    validate_profiles(
        config(tmp_path, {"p": ProfileConfig(servers=["git"], tools=Patterns(allow=["g*/x"]))})
    )


def test_a_resource_pattern_with_a_scheme_is_not_read_as_a_server(tmp_path: Path) -> None:
    # "file://..." has a slash after a colon: it is a URI pattern, not alias/name.
    validate_profiles(
        config(tmp_path, {"p": ProfileConfig(resources=Patterns(allow=["file:///srv/*"]))})
    )


@pytest.mark.parametrize(
    "profile",
    [ProfileConfig(tools=Patterns(allow=[""])), ProfileConfig(pinned=["notes/"])],
)
def test_an_empty_pattern_is_named(tmp_path: Path, profile: ProfileConfig) -> None:
    _, message = profile_error(tmp_path, p=profile)
    assert message == "is empty"


@pytest.mark.parametrize(
    ("profile", "path", "message"),
    [
        (ProfileConfig(template="{alias}"), "template", "must contain {tool}"),
        (ProfileConfig(max_length=15), "max_length", "must be between 16 and 1024"),
        (ProfileConfig(max_length=1025), "max_length", "must be between 16 and 1024"),
        (ProfileConfig(max_tools=0), "max_tools", "must be at least 1"),
        (ProfileConfig(allow_servers=[""]), "allow_servers[0]", "is empty"),
        (
            ProfileConfig(allow_servers=["nope"]),
            "allow_servers[0]",
            "'nope' is not a configured server",
        ),
        (ProfileConfig(socket_mode="rw"), "socket_mode", 'must be an octal string such as "0660"'),
        (
            ProfileConfig(socket_mode="0800"),
            "socket_mode",
            'must be an octal string such as "0660"',
        ),
        (ProfileConfig(socket_mode="01777"), "socket_mode", "must be between 0000 and 0777"),
        (
            ProfileConfig(socket="/s", allow_groups=["no-such-group-here"]),
            "allow_groups[0]",
            "no group named 'no-such-group-here'",
        ),
        (
            ProfileConfig(allow_uids=[1000]),
            "allow_uids",
            "only applies to a profile with its own socket",
        ),
        (
            ProfileConfig(allow_groups=["root"]),
            "allow_groups",
            "only applies to a profile with its own socket",
        ),
    ],
)
def test_a_profile_key_out_of_range_is_named(
    tmp_path: Path, profile: ProfileConfig, path: str, message: str
) -> None:
    assert profile_error(tmp_path, p=profile) == (f"profiles.p.{path}", message)


@pytest.mark.parametrize("group", ["\u00b2", "\u0663"])
def test_a_group_of_digits_other_than_ascii_is_a_name(tmp_path: Path, group: str) -> None:
    profile = ProfileConfig(socket=str(tmp_path / "p.sock"), allow_groups=[group])
    assert profile_error(tmp_path, p=profile) == (
        "profiles.p.allow_groups[0]",
        f"no group named {group!r}",
    )


def test_an_allowed_server_may_be_a_glob_that_matches_nothing_yet(tmp_path: Path) -> None:
    validate_profiles(config(tmp_path, {"p": ProfileConfig(allow_servers=["later-*"])}))


def test_the_default_profile_cannot_have_a_socket_of_its_own(tmp_path: Path) -> None:
    assert profile_error(tmp_path, default=ProfileConfig(socket=str(tmp_path / "d.sock"))) == (
        "profiles.default.socket",
        "the default profile is served on [daemon] socket",
    )


def test_a_profile_socket_cannot_be_the_daemons(tmp_path: Path) -> None:
    # Written another way, the same file: the paths are compared once made absolute.
    same = str(tmp_path / "sub" / ".." / "mcpd.sock")
    assert profile_error(tmp_path, p=ProfileConfig(socket=same)) == (
        "profiles.p.socket",
        "is the daemon's own socket",
    )


def test_two_profiles_cannot_share_a_socket(tmp_path: Path) -> None:
    shared = str(tmp_path / "agents.sock")
    assert profile_error(
        tmp_path, a=ProfileConfig(socket=shared), b=ProfileConfig(socket=shared)
    ) == ("profiles.b.socket", "is profile 'a''s socket too")
