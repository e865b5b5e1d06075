"""Other hosts' per-server OAuth settings, as mcpd's ``[auth]`` table: what is taken,
what is left out (each with a note that names its key and why), and that no value a
host file holds, however odd, stops the import."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.config.importing.oauth_hints import oauth_table, port_of


def as_text(value: Any, where: str) -> str:
    return value if isinstance(value, str) else repr(value)


def table(hints: Any) -> tuple[dict[str, Any] | None, list[str]]:
    notes: list[str] = []
    return oauth_table(hints, "mcpServers.s.oauth", as_text, notes), notes


@pytest.mark.parametrize(
    ("value", "port"),
    [
        (8080, 8080),
        (1, 1),
        (65535, 65535),
        ("8080", 8080),
        ("http://127.0.0.1:33418/callback", 33418),
        ("http://localhost:9000", 9000),
        ("http://[::1]:9000/cb", 9000),
    ],
)
def test_a_callback_port_or_loopback_redirect_gives_the_port(value: Any, port: int) -> None:
    assert port_of(value) == port


@pytest.mark.parametrize(
    "value",
    [
        0,
        65536,
        -1,
        True,
        8080.0,
        None,
        ["8080"],
        "0",
        "99999",
        "",
        "http://localhost/cb",
        "http://localhost:0/cb",
        "http://localhost:99999/cb",
        "https://localhost:8080/cb",
        "http://example.test:8080/cb",
        "http://127.0.0.1.example.test:8080/cb",
        "http://[::1/cb",
    ],
)
def test_anything_else_gives_no_port(value: Any) -> None:
    assert port_of(value) is None


def test_a_port_of_digits_other_than_ascii_gives_no_port() -> None:
    # "²" passes str.isdigit() but not int(); "٣" would be read as port 3.
    for value in ("\u00b2", "\u0663\u0663", "80\u00b2"):
        assert port_of(value) is None


def test_claude_and_gemini_settings_are_taken() -> None:
    auth, notes = table(
        {
            "enabled": True,
            "clientId": "cid",
            "clientSecret": "shh",
            "callbackPort": 7777,
            "scopes": "read  write",
        }
    )
    assert auth == {
        "client_id": "cid",
        "client_secret": "shh",
        "redirect_port": 7777,
        "scopes": ["read", "write"],
    }
    assert notes == [
        "mcpServers.s.oauth: a client secret with no issuer; set issuer to the authorization "
        "server the client was registered at, or mcpd sends the secret to whichever one the "
        "server names"
    ]


def test_cursor_settings_are_taken() -> None:
    auth, notes = table({"CLIENT_ID": "cid", "scopes": ["a", "b"]})
    assert auth == {"client_id": "cid", "scopes": ["a", "b"]}
    assert notes == []


def test_a_redirect_uri_gives_its_port() -> None:
    auth, _ = table({"clientId": "c", "redirectUri": "http://localhost:4321/oauth/callback"})
    assert auth == {"client_id": "c", "redirect_port": 4321}


def test_what_mcpd_discovers_itself_is_not_taken_and_the_note_says_why() -> None:
    auth, notes = table({"clientId": "c", "tokenUrl": "https://as/token", "issuer": "x"})
    assert auth == {"client_id": "c"}
    assert notes == [
        "mcpServers.s.oauth.tokenUrl: mcpd finds the authorization server from the "
        "server's own metadata; not imported",
        "mcpServers.s.oauth.issuer: 'x' is not an http(s) URL; not imported",
    ]


def test_the_issuer_a_client_belongs_to_is_taken() -> None:
    hints = {
        "clientId": "cid",
        "clientSecret": "shh",
        "tokenUrl": "https://auth.example.com/oauth/token",
        "issuer": "https://auth.example.com/tenant",
    }
    auth, _ = table(hints)
    assert auth is not None and auth["issuer"] == "https://auth.example.com/tenant"


@pytest.mark.parametrize(
    ("url", "issuer"),
    [
        (
            "https://auth.example.com/.well-known/oauth-authorization-server",
            "https://auth.example.com",
        ),
        (
            "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
            "https://auth.example.com/tenant1",
        ),
        (
            "https://kc.example.com/realms/r/.well-known/openid-configuration",
            "https://kc.example.com/realms/r",
        ),
    ],
)
def test_a_well_known_metadata_url_gives_the_issuer_it_belongs_to(url: str, issuer: str) -> None:
    auth, notes = table({"clientId": "c", "clientSecret": "shh", "authServerMetadataUrl": url})
    assert auth == {"client_id": "c", "client_secret": "shh", "issuer": issuer}
    assert notes == []


def test_a_client_secret_left_without_an_issuer_is_named() -> None:
    auth, notes = table(
        {
            "clientId": "c",
            "clientSecret": "shh",
            "authServerMetadataUrl": "https://auth.example.com/meta.json",
        }
    )
    assert auth == {"client_id": "c", "client_secret": "shh"}
    assert notes == [
        "mcpServers.s.oauth.authServerMetadataUrl: not an authorization server's well-known "
        "metadata URL, so it names no issuer; mcpd finds the authorization server from the "
        "server's own metadata; not imported",
        "mcpServers.s.oauth: a client secret with no issuer; set issuer to the authorization "
        "server the client was registered at, or mcpd sends the secret to whichever one the "
        "server names",
    ]


def test_an_unknown_key_is_named() -> None:
    auth, notes = table({"clientId": "c", "pkce": False})
    assert auth == {"client_id": "c"}
    assert notes == ["mcpServers.s.oauth.pkce: not an OAuth setting mcpd has; not imported"]


@pytest.mark.parametrize("scopes", [["a", 1], {"a": 1}, 3])
def test_scopes_that_are_not_strings_are_named(scopes: Any) -> None:
    auth, notes = table({"clientId": "c", "scopes": scopes})
    assert auth == {"client_id": "c"}
    assert notes == ["mcpServers.s.oauth.scopes: not a list of scopes; not imported"]


@pytest.mark.parametrize("port", ["https://localhost:1/cb", 0, 70000])
def test_a_port_that_is_not_a_loopback_port_is_named(port: Any) -> None:
    auth, notes = table({"clientId": "c", "callbackPort": port})
    assert auth == {"client_id": "c"}
    assert notes == [
        f"mcpServers.s.oauth.callbackPort: {port!r} is not a loopback port; not imported"
    ]


def test_a_port_of_digits_other_than_ascii_is_named_not_a_crash() -> None:
    auth, notes = table({"clientId": "c", "callbackPort": "\u00b2"})
    assert auth == {"client_id": "c"}
    assert notes == [
        "mcpServers.s.oauth.callbackPort: '\u00b2' is not a loopback port; not imported"
    ]


def test_a_secret_without_its_client_is_dropped() -> None:
    auth, notes = table({"clientSecret": "shh"})
    assert auth is None
    assert notes == ["mcpServers.s.oauth: a client secret without a client id; not imported"]


def test_oauth_turned_off_there_is_not_imported() -> None:
    assert table({"enabled": False, "clientId": "c"}) == (
        None,
        ["mcpServers.s.oauth: OAuth is turned off there; not imported"],
    )


def test_settings_that_are_not_an_object_are_named() -> None:
    assert table(["clientId"]) == (None, ["mcpServers.s.oauth: not an object; not imported"])


def test_settings_that_leave_nothing_give_no_table() -> None:
    assert table({}) == (None, [])
    assert table({"enabled": True}) == (None, [])
