"""One server's entry in ``mcpd status`` (``status_of``) as its parts make it, before
any start: a stdio server's sandbox (what a start would meet, or what the last start
could not apply), an HTTP server's login unless a configured header is its
credentials, and what is not there yet (a pid, being held back)."""

from __future__ import annotations

from typing import Any

from msgspec import to_builtins

from mcpd.config.loading.load import parse_config
from mcpd.login_answers import LoginStatus
from mcpd.registry.tables.catalog import Catalog
from mcpd.server_row import SandboxStatus, ServerRow
from mcpd.servers.life.server_parts import ServerParts
from mcpd.servers.status.status_of import status_of

URL = "https://mcp.example.com/mcp"


def unprotected(row: ServerRow) -> str | None:
    assert isinstance(row.sandbox, SandboxStatus)
    return row.sandbox.unprotected


def parts(**server: Any) -> ServerParts:
    config = parse_config({"servers": {"s": server}}, env={})
    return ServerParts("s", config.servers["s"], config, Catalog(config.naming), lambda c: None)


async def test_a_server_not_started_has_no_pid_and_is_not_held_back() -> None:
    row = status_of(parts(command="x"))
    assert (row.alias, row.state, row.pid, row.held_back) == (
        "s",
        "starting",
        None,
        None,
    )
    assert (row.forgotten_names, row.secrets_masked) == (0, {})


async def test_a_stdio_servers_sandbox_is_shown_and_it_has_no_login() -> None:
    row = status_of(parts(command="x"))
    assert isinstance(row.sandbox, SandboxStatus) and row.sandbox.level == "default"
    assert isinstance(row.sandbox.home, str) and row.sandbox.home.endswith("/homes/s")
    assert "auth" not in to_builtins(row)


async def test_after_a_start_the_sandbox_says_what_that_start_could_not_apply() -> None:
    p = parts(command="x")
    p.attempts = 1
    p.unprotected = "no user namespaces here"
    assert unprotected(status_of(p)) == "no user namespaces here"
    # A lazy server's first attempt is not a start of its child.
    lazy = parts(command="x", start="lazy")
    lazy.attempts = 1
    lazy.unprotected = "no user namespaces here"
    assert unprotected(status_of(lazy)) != "no user namespaces here"


async def test_an_http_servers_login_is_shown_and_it_has_no_sandbox() -> None:
    row = status_of(parts(url=URL))
    assert "sandbox" not in to_builtins(row)
    assert isinstance(row.auth, LoginStatus)
    assert (row.auth.state, row.auth.logged_in, row.auth.url) == (
        "no_login",
        False,
        URL,
    )


async def test_an_http_server_with_its_own_authorization_header_shows_no_login() -> None:
    row = status_of(parts(url=URL, headers={"Authorization": "Bearer abc"}))
    assert "auth" not in to_builtins(row)
    assert "abc" not in repr(row)
