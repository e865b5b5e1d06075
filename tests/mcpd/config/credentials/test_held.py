"""The secrets a config holds, which nothing mcpd writes or shows may contain: every value
that came from the environment or a secret file, and what the file itself writes where
the place says it is a secret (credential headers and the token in them, secret-named
variables, the OAuth client's secret and key, secrets in arguments and URLs); each
value once, none too short to tell apart from ordinary text."""

from __future__ import annotations

from typing import Any

from mcpd.config.credentials.held import held_in
from mcpd.config.credentials.secrets import HeldSecret
from mcpd.config.tables.model import Config
from mcpd.config.tables.servertable import AuthConfig, ServerConfig


def held(referenced: tuple[HeldSecret, ...] = (), **servers: ServerConfig) -> dict[str, str]:
    return {s.value: s.where for s in held_in(Config(servers=servers), referenced)}


def http(**keys: Any) -> ServerConfig:
    return ServerConfig(url="https://mcp.example.test/mcp", **keys)


def stdio(*args: str, **keys: Any) -> ServerConfig:
    return ServerConfig(command="run", args=list(args), **keys)


def test_credential_headers_and_the_token_in_them_are_held() -> None:
    server = http(
        headers={
            "Authorization": "Bearer tok-123456",
            "X-Api-Key": "key-abcdef",
            "Cookie": "session=zzzzzz",
            "X-Trace": "trace-123456",
        }
    )
    assert held(h=server) == {
        "Bearer tok-123456": "servers.h.headers.Authorization",
        "tok-123456": "servers.h.headers.Authorization",
        "key-abcdef": "servers.h.headers.X-Api-Key",
        "session=zzzzzz": "servers.h.headers.Cookie",
    }


def test_a_header_value_with_a_space_after_no_scheme_is_held_whole_only() -> None:
    assert held(h=http(headers={"Authorization": "v1.0 abcdef123"})) == {
        "v1.0 abcdef123": "servers.h.headers.Authorization"
    }


def test_secret_named_variables_and_oauth_credentials_are_held() -> None:
    server = stdio(env={"GITHUB_TOKEN": "ghp_abcdef", "LOG_LEVEL": "verbose-debug"})
    assert held(s=server) == {"ghp_abcdef": "servers.s.env.GITHUB_TOKEN"}
    auth = AuthConfig(client_id="client-id-1", client_secret="client-secret-1")
    assert held(h=http(auth=auth)) == {"client-secret-1": "servers.h.auth.client_secret"}


def test_secrets_in_arguments_and_urls_are_held() -> None:
    assert held(s=stdio("--token", "abcdefgh123")) == {"abcdefgh123": "servers.s.args[1]"}
    url = "https://mcp.example.test/mcp?api_key=secretvalue1"
    assert held(h=ServerConfig(url=url)) == {"secretvalue1": "servers.h.url"}


def test_what_came_from_the_environment_is_held_where_it_was_used() -> None:
    referenced = (HeldSecret("servers.s.cwd", "/from/a/variable"),)
    assert held(referenced, s=stdio()) == {"/from/a/variable": "servers.s.cwd"}


def test_each_value_is_held_once_under_where_it_was_first_found() -> None:
    referenced = (HeldSecret("servers.a.env.API_TOKEN", "shared-123456"),)
    server = stdio(env={"API_TOKEN": "shared-123456", "OTHER_TOKEN": "shared-123456"})
    assert held(referenced, a=server) == {"shared-123456": "servers.a.env.API_TOKEN"}
    assert len(held_in(Config(servers={"a": server}), referenced)) == 1


def test_values_too_short_to_tell_apart_are_not_held() -> None:
    server = http(headers={"Authorization": "Bearer abc"}, auth=AuthConfig(client_secret="s"))
    assert held((HeldSecret("x", "12345"),), h=server) == {
        "Bearer abc": "servers.h.headers.Authorization"
    }
