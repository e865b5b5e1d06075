"""What a ``[servers.X]`` table must satisfy beyond its types: each mistake is named by
its key path, a valid table passes, and a key whose value is not known yet (left
unexpanded) is passed over without hiding the mistakes elsewhere."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from mcpd.config.checks.servers import known_errors, server_errors
from mcpd.config.tables.model import ConfigError
from mcpd.config.tables.servertable import AuthConfig, ServerConfig, ToolsConfig

URL = "https://mcp.example.test/mcp"

POSITIVE = "must be positive, at most 31536000 (a year)"


def stdio(**keys: Any) -> ServerConfig:
    return ServerConfig(command="/bin/true", **keys)


def http(**keys: Any) -> ServerConfig:
    return ServerConfig(url=URL, **keys)


def errors(server: ServerConfig, alias: str = "s") -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in server_errors(alias, server)]


def only_error(server: ServerConfig, alias: str = "s") -> tuple[str, str]:
    found = errors(server, alias)
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(
    "server",
    [
        stdio(),
        stdio(args=["-v"], env={"A": "1"}, cwd="/tmp", inherit_env=["LANG", "AWS_*"]),
        http(),
        http(headers={"X-Api-Key": "k"}, transport="sse"),
        http(auth=AuthConfig(type="client_credentials", client_id="c", client_secret="s")),
        http(auth=AuthConfig(scopes=["read", "mcp:tools"], redirect_port=65535)),
    ],
)
def test_a_valid_table_has_no_error(server: ServerConfig) -> None:
    assert errors(server) == []


@pytest.mark.parametrize("alias", ["", "has space", "dot.ted", "slash/ed", "line\n"])
def test_an_alias_outside_the_allowed_characters_is_refused(alias: str) -> None:
    path, message = only_error(stdio(), alias)
    # Quoted as the file writes it: "dot.ted" is one key, not ted under dot.
    assert path == f"servers.{json.dumps(alias)}"
    assert "A-Z a-z 0-9 _ -" in message


def test_a_server_needs_exactly_one_of_command_and_url() -> None:
    # Alone: what its transport needs is moot until the user picks one of the two.
    for server in (ServerConfig(), ServerConfig(command="/bin/true", url=URL)):
        assert only_error(server) == (
            "servers.s",
            "give exactly one of `command` (stdio) or `url` (HTTP)",
        )


def test_a_blank_command_is_refused() -> None:
    assert only_error(ServerConfig(command="   ")) == ("servers.s.command", "is empty")


@pytest.mark.parametrize("url", ["ftp://host/mcp", "http://", "https:// host", "localhost:80"])
def test_a_url_that_is_not_http_is_refused(url: str) -> None:
    path, message = only_error(ServerConfig(url=url))
    assert path == "servers.s.url"
    assert "http:// or https://" in message


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://ada:hunter2@h.example/mcp", "credentials in the URL are not supported"),
        ("https://ada@h.example/mcp", "credentials in the URL are not supported"),
        ("http://h.example:99999/mcp", "its port is not a number from 0 to 65535"),
    ],
)
def test_a_url_its_transport_could_not_use_is_refused_at_its_key(url: str, message: str) -> None:
    """Refused here, naming the key, not each time the server would start."""
    path, said = only_error(ServerConfig(url=url))
    assert path == "servers.s.url" and message in said
    assert "hunter2" not in said


def test_a_transport_that_does_not_fit_the_server_is_named() -> None:
    assert only_error(stdio(transport="http")) == (
        "servers.s.transport",
        '"http" needs a `url`, not a `command`',
    )
    assert only_error(http(transport="stdio")) == (
        "servers.s.transport",
        '"stdio" needs a `command`, not a `url`',
    )


@pytest.mark.parametrize(
    ("server", "key"),
    [
        (stdio(headers={"X-A": "b"}), "headers"),
        (stdio(ca_file="/etc/hostname"), "ca_file"),
    ],
)
def test_http_keys_on_a_stdio_server_are_named(server: ServerConfig, key: str) -> None:
    assert (f"servers.s.{key}", "only applies to HTTP servers (with `url`)") in errors(server)


@pytest.mark.parametrize(
    ("keys", "key"),
    [
        ({"args": ["-v"]}, "args"),
        ({"env": {"A": "1"}}, "env"),
        ({"cwd": "/tmp"}, "cwd"),
        ({"inherit_env": True}, "inherit_env"),
    ],
)
def test_stdio_keys_on_an_http_server_are_named(keys: dict[str, Any], key: str) -> None:
    assert only_error(http(**keys)) == (
        f"servers.s.{key}",
        "only applies to stdio servers (with `command`)",
    )


@pytest.mark.parametrize(
    ("header", "value"),
    [("X-A", "a\r\nInjected: yes"), ("X-A", "a\0"), ("X-A", "a\x01"), ("X-A", "v ")],
)
def test_a_header_value_that_could_split_the_request_is_refused(header: str, value: str) -> None:
    path, message = only_error(http(headers={header: value}))
    assert path == f"servers.s.headers.{header}"
    assert "no CR, LF, NUL or other control characters" in message


@pytest.mark.parametrize(
    ("header", "shown"),
    [("X A", "X A"), ("X:A", "X:A"), ("X\nA", "X\\nA"), ("", ""), ("X\0", "X\\x00"), ("Ä", "Ä")],
)
def test_a_header_name_that_is_no_token_is_refused_and_shown_escaped(
    header: str, shown: str
) -> None:
    path, message = only_error(http(headers={header: "v"}))
    assert path == f"servers.s.headers.{shown}"
    assert "a header name is letters, digits and" in message


@pytest.mark.parametrize("header", ["Host", "accept", "Accept-Encoding", "Content-Length"])
def test_a_header_mcpd_writes_itself_is_refused_by_name(header: str) -> None:
    # Taken, it would fail every connection to the server, as an internal error.
    path, message = only_error(http(headers={header: "v"}))
    assert path == f"servers.s.headers.{header}"
    assert message == "is a header mcpd writes itself"


NUL = "contains a NUL character, which the system cannot pass on"
SURROGATE = "contains a character that has no encoding (a lone surrogate)"
CWD_ABSOLUTE = "must be an absolute path (~ and relative paths are not expanded)"


@pytest.mark.parametrize(
    ("keys", "path", "message"),
    [
        ({"env": {"A=B": "1"}}, "servers.s.env.A=B", 'a variable name cannot contain "="'),
        ({"env": {"": "1"}}, "servers.s.env", "a variable name cannot be empty"),
        ({"env": {"A\0B": "1"}}, "servers.s.env.A\\x00B", NUL),
        ({"env": {"A": "1\0"}}, "servers.s.env.A", NUL),
        ({"env": {"A": "\ud800"}}, "servers.s.env.A", SURROGATE),
        ({"args": ["-v", "a\0b"]}, "servers.s.args[1]", NUL),
        ({"args": ["\udfff"]}, "servers.s.args[0]", SURROGATE),
        ({"cwd": "/tmp\0"}, "servers.s.cwd", NUL),
        ({"cwd": ""}, "servers.s.cwd", "is empty"),
        ({"cwd": "relative/dir"}, "servers.s.cwd", CWD_ABSOLUTE),
        ({"cwd": "./"}, "servers.s.cwd", CWD_ABSOLUTE),
        ({"cwd": "~/notes"}, "servers.s.cwd", CWD_ABSOLUTE),
        ({"read": ["/srv/a\0"]}, "servers.s.read[0]", NUL),
        ({"write": ["/srv/\ud800"]}, "servers.s.write[0]", SURROGATE),
    ],
)
def test_a_string_the_system_cannot_take_is_named(
    keys: dict[str, Any], path: str, message: str
) -> None:
    assert only_error(stdio(**keys)) == (path, message)


def test_a_command_the_system_cannot_take_is_named() -> None:
    assert only_error(ServerConfig(command="/bin/tr\0ue")) == ("servers.s.command", NUL)


def test_a_ca_file_the_system_cannot_take_is_named() -> None:
    assert only_error(http(ca_file="/etc/ca\0.pem")) == ("servers.s.ca_file", NUL)


@pytest.mark.parametrize(
    "url", [URL + "\x01", URL + "/a b", URL + "\n", "https://mcp.exa\0mple.test/", URL + "\x7f"]
)
def test_a_url_with_a_control_character_or_a_space_is_refused(url: str) -> None:
    assert only_error(ServerConfig(url=url)) == (
        "servers.s.url",
        "contains a control character or a space (percent-encode it)",
    )


@pytest.mark.parametrize("key", ["issuer", "client_metadata_url"])
def test_an_auth_url_with_a_control_character_is_refused(key: str) -> None:
    url = "https://as.example.test/client\0"
    found = errors(http(auth=AuthConfig(**{key: url})))
    assert (
        f"servers.s.auth.{key}",
        "contains a control character or a space (percent-encode it)",
    ) in found


@pytest.mark.parametrize(
    ("keys", "path", "message"),
    [
        ({"call_timeout": 0.0}, "servers.s.call_timeout", POSITIVE),
        ({"call_timeout": -1.0}, "servers.s.call_timeout", POSITIVE),
        ({"connect_timeout": 0.0}, "servers.s.connect_timeout", POSITIVE),
        ({"connect_timeout": float("nan")}, "servers.s.connect_timeout", POSITIVE),
        ({"start": "lazy", "idle_stop": float("nan")}, "servers.s.idle_stop", POSITIVE),
        ({"start": "lazy", "idle_stop": float("inf")}, "servers.s.idle_stop", POSITIVE),
        ({"call_timeout": 1e13}, "servers.s.call_timeout", POSITIVE),
        ({"tool_timeouts": {"slow": float("inf")}}, "servers.s.tool_timeouts.slow", POSITIVE),
        ({"max_concurrency": 0}, "servers.s.max_concurrency", "must be at least 1"),
        ({"max_list_items": 0}, "servers.s.max_list_items", "must be at least 1"),
        ({"max_instructions_bytes": -5}, "servers.s.max_instructions_bytes", "must be at least 1"),
        ({"tool_timeouts": {"slow": 0.0}}, "servers.s.tool_timeouts.slow", POSITIVE),
        (
            {"tool_timeouts": {"slow": float("nan")}},
            "servers.s.tool_timeouts.slow",
            POSITIVE,
        ),
    ],
)
def test_a_number_out_of_range_is_named(keys: dict[str, Any], path: str, message: str) -> None:
    server = http(**keys) if "connect_timeout" in keys else stdio(**keys)
    assert only_error(server) == (path, message)


def test_the_smallest_allowed_numbers_pass() -> None:
    assert errors(stdio(call_timeout=0.001, max_concurrency=1, max_list_items=1)) == []


def test_a_missing_ca_file_is_named_with_its_path(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    assert only_error(http(ca_file=missing)) == ("servers.s.ca_file", f"{missing!r} does not exist")
    present = tmp_path / "ca.pem"
    present.write_text("")
    assert errors(http(ca_file=str(present))) == []


def test_lazy_start_is_for_stdio_servers_only() -> None:
    assert errors(stdio(start="lazy")) == []
    assert only_error(http(start="lazy")) == (
        "servers.s.start",
        '"lazy" only applies to stdio servers (with `command`)',
    )


def test_a_request_kind_relayed_twice_is_named() -> None:
    assert only_error(stdio(relay=["roots", "sampling", "roots"])) == (
        "servers.s.relay",
        "names a request kind twice",
    )


def test_an_empty_pattern_in_tools_or_prompts_is_named() -> None:
    server = stdio(tools=ToolsConfig(allow=["a*", ""]), prompts=ToolsConfig(deny=[""]))
    assert errors(server) == [
        ("servers.s.tools.allow[1]", "is empty"),
        ("servers.s.prompts.deny[0]", "is empty"),
    ]


def test_two_tools_renamed_to_one_name_are_named() -> None:
    server = stdio(tools=ToolsConfig(rename={"a": "same", "b": "other", "c": "same"}))
    assert errors(server) == [("servers.s.tools.rename.c", "'a' is already renamed to 'same'")]


def test_a_tool_renamed_to_blank_is_named() -> None:
    assert only_error(stdio(tools=ToolsConfig(rename={"a": " "}))) == (
        "servers.s.tools.rename.a",
        "is empty",
    )


# -- [servers.X.auth] --


def auth_errors(**keys: Any) -> list[tuple[str, str]]:
    return errors(http(auth=AuthConfig(**keys)))


def test_auth_is_for_http_servers_only() -> None:
    assert only_error(stdio(auth=AuthConfig())) == (
        "servers.s.auth",
        "only applies to HTTP servers (with `url`)",
    )


def test_an_authorization_header_cannot_be_combined_with_auth() -> None:
    server = http(headers={"AUTHORIZATION": "Bearer x"}, auth=AuthConfig())
    path, message = only_error(server)
    assert path == "servers.s.headers.AUTHORIZATION"
    assert "mcpd sends the token" in message


def test_client_credentials_needs_a_client_and_a_credential() -> None:
    assert auth_errors(type="client_credentials") == [
        ("servers.s.auth.client_id", "is needed for client_credentials"),
        ("servers.s.auth", "client_credentials needs client_secret or private_key"),
    ]


@pytest.mark.parametrize("key", ["client_secret", "private_key"])
def test_a_credential_without_its_client_is_named(key: str) -> None:
    found = auth_errors(**{key: "x"})
    assert found[0] == (f"servers.s.auth.{key}", "needs client_id (the client it belongs to)")


@pytest.mark.parametrize("key", ["client_id", "client_secret"])
@pytest.mark.parametrize(
    ("value", "said"),
    [("s3cret-value\n", "a line feed at character 13"), ("s3\0cret", "a NUL at character 3")],
)
def test_a_client_id_or_secret_holding_a_control_character_is_named_not_shown(
    key: str, value: str, said: str
) -> None:
    keys = {"client_id": "c", key: value}
    path, message = only_error(http(auth=AuthConfig(**keys)))
    assert path == f"servers.s.auth.{key}"
    assert said in message and "cret" not in message


@pytest.mark.parametrize("key", ["client_id", "client_secret"])
def test_a_blank_client_value_is_named(key: str) -> None:
    keys = {"client_id": "c", key: "  "}
    assert auth_errors(**keys) == [(f"servers.s.auth.{key}", "is empty")]


@pytest.mark.parametrize(
    "url",
    ["http://client.example.test/meta.json", "https://client.example.test", "https://a/b#frag"],
)
def test_a_client_metadata_url_must_be_https_with_a_path(url: str) -> None:
    assert auth_errors(client_metadata_url=url) == [
        (
            "servers.s.auth.client_metadata_url",
            "must be an https:// URL with a path and no fragment",
        )
    ]


@pytest.mark.parametrize("issuer", ["https://as.test/?x=1", "https://as.test/#f", "as.test"])
def test_an_issuer_with_query_or_fragment_is_refused(issuer: str) -> None:
    assert auth_errors(issuer=issuer) == [
        ("servers.s.auth.issuer", "must be an http(s) URL without query or fragment")
    ]


def test_an_issuer_with_a_path_is_accepted() -> None:
    assert auth_errors(issuer="https://as.test/tenant/1") == []


@pytest.mark.parametrize(("index", "scope"), [(1, ""), (1, "two words"), (1, 'q"'), (1, "a\\b")])
def test_each_scope_must_be_one_token(index: int, scope: str) -> None:
    assert auth_errors(scopes=["ok", scope]) == [
        (f"servers.s.auth.scopes[{index}]", "must be one scope token (no spaces)")
    ]


@pytest.mark.parametrize("port", [-1, 65536])
def test_a_redirect_port_out_of_range_is_refused(port: int) -> None:
    assert auth_errors(redirect_port=port) == [
        ("servers.s.auth.redirect_port", "must be a port number (0: any free port)")
    ]


def test_a_private_key_that_does_not_load_is_named() -> None:
    found = auth_errors(client_id="c", private_key="not a key")
    assert [path for path, _ in found] == ["servers.s.auth.private_key"]


def test_the_token_endpoint_method_needs_its_credential() -> None:
    assert auth_errors(client_id="c", token_endpoint_auth_method="private_key_jwt") == [
        ("servers.s.auth.token_endpoint_auth_method", "private_key_jwt needs private_key")
    ]
    assert auth_errors(client_id="c", token_endpoint_auth_method="client_secret_post") == [
        (
            "servers.s.auth.token_endpoint_auth_method",
            "client_secret_post needs client_secret",
        )
    ]
    assert auth_errors(token_endpoint_auth_method="none") == []


# -- known_errors: passing over values not known yet --


def check_server(alias: str, s: ServerConfig, unknown: Collection[str] = ()) -> None:
    """Raise the first error ``known_errors`` gives, as a config check reports it."""
    for error in known_errors(alias, s, unknown):
        raise error


def test_check_server_raises_the_first_error() -> None:
    server = ServerConfig(url="nope", connect_timeout=0.0)
    with pytest.raises(ConfigError) as info:
        check_server("s", server)
    assert info.value.path == "servers.s.url"
    assert str(info.value) == "servers.s.url: must be an http:// or https:// URL"


def test_check_server_passes_over_a_key_not_known_yet_but_not_the_others() -> None:
    # The url is "${URL}" as written: whether it is a URL is known once URL is set.
    server = ServerConfig(url="${URL}", connect_timeout=0.0)
    with pytest.raises(ConfigError) as info:
        check_server("s", server, unknown={"servers.s.url"})
    assert info.value.path == "servers.s.connect_timeout"
    check_server("s", ServerConfig(url="${URL}"), unknown={"servers.s.url"})


def test_check_server_passes_over_what_lies_under_a_key_not_known_yet() -> None:
    server = http(headers={"X-A": "a\nb"}, tool_timeouts={"t": 0.0})
    check_server("s", stdio(tool_timeouts={"t": 0.0}), unknown={"servers.s.tool_timeouts"})
    with pytest.raises(ConfigError) as info:
        check_server("s", server, unknown={"servers.s.headers"})
    assert info.value.path == "servers.s.tool_timeouts.t"


def test_a_key_that_only_starts_like_an_unknown_one_is_still_checked() -> None:
    server = stdio(max_list_items=0)
    with pytest.raises(ConfigError) as info:
        check_server("s", server, unknown={"servers.s.max_list"})
    assert str(info.value) == "servers.s.max_list_items: must be at least 1"
