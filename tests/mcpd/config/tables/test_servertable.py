"""``[servers.NAME]`` as a struct: the transport a server gets when its table does not
name one, how many calls it takes at once, and an auth table that never prints its
secrets."""

from __future__ import annotations

import msgspec
import pytest

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import ConfigError
from mcpd.config.tables.servertable import AuthConfig, ServerConfig


def server(**table: object) -> ServerConfig:
    return msgspec.convert(table, ServerConfig)


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("https://mcp.example.com/mcp", "http"),
        ("https://mcp.example.com/sse", "sse"),
        ("https://mcp.example.com/v1/SSE/", "sse"),
        ("https://mcp.example.com/sse?key=1", "sse"),
        ("https://mcp.example.com/sse#top", "sse"),
        ("https://mcp.example.com/sse-events", "http"),
        ("https://mcp.example.com/mysse", "http"),
        ("https://mcp.example.com/mcp?next=/sse", "http"),
        ("https://mcp.example.com/mcp#/sse", "http"),
        ("https://sse.example.com/", "http"),
        ("https://mcp.example.com", "http"),
    ],
)
def test_a_url_without_a_transport_is_sse_only_when_its_path_ends_in_sse(
    url: str, kind: str
) -> None:
    assert server(url=url).transport == kind
    assert server(url=url).kind == kind


def test_a_command_is_stdio_and_a_named_transport_is_kept() -> None:
    assert server(command="notes").transport == "stdio"
    assert server(url="https://mcp.example.com/sse", transport="http").transport == "http"
    assert server(url="https://mcp.example.com/mcp", transport="sse").transport == "sse"
    # Even a wrong pairing is kept as written, for the checks to name it.
    assert server(command="notes", transport="sse").transport == "sse"


def test_kind_is_settled_also_for_a_struct_built_by_hand() -> None:
    assert ServerConfig(command="notes").kind == "stdio"
    assert ServerConfig(url="https://mcp.example.com/sse").kind == "sse"
    assert ServerConfig().kind == "http"


@pytest.mark.parametrize("url", ["http://[::1/sse", "http://[::1/mcp"])
def test_a_url_that_cannot_be_split_is_a_config_error_naming_the_url(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"servers": {"s": {"url": url}}}, env={})
    assert (caught.value.path, caught.value.message) == (
        "servers.s.url",
        f'invalid URL "{url}": its host is not a valid name or address',
    )


def test_concurrency_is_its_own_else_four_for_a_process_and_sixteen_for_http() -> None:
    assert server(command="notes").concurrency() == 4
    assert server(url="https://mcp.example.com/mcp").concurrency() == 16
    assert server(url="https://mcp.example.com/sse").concurrency() == 16
    assert server(command="notes", max_concurrency=1).concurrency() == 1
    assert server(url="https://mcp.example.com/mcp", max_concurrency=64).concurrency() == 64


def test_an_auth_table_prints_what_it_holds_but_its_secrets() -> None:
    auth = AuthConfig(
        type="client_credentials",
        client_id="mcpd",
        client_secret="cs-1234567890",
        private_key="-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----",
        scopes=["read"],
        redirect_port=8976,
    )
    shown = repr(auth)
    assert "cs-1234567890" not in shown and "MIIE" not in shown
    assert "client_secret='***'" in shown and "private_key='***'" in shown
    assert "client_id='mcpd'" in shown and "scopes=['read']" in shown
    assert "redirect_port=8976" in shown
    # What is not set is not printed; a server holding it prints no secret either.
    assert "issuer" not in shown
    assert "cs-1234567890" not in repr(server(url="https://a.example.com/mcp", auth=auth))


def test_tables_refuse_keys_they_do_not_have() -> None:
    for table in (
        {"command": "notes", "tools": {"alow": ["x"]}},
        {"command": "notes", "limits": {"memroy": "1G"}},
        {"url": "https://a.example.com/mcp", "auth": {"secret": "x"}},
    ):
        with pytest.raises(msgspec.ValidationError, match="unknown field"):
            server(**table)
