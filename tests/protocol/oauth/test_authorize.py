from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from protocol.oauth import (
    AuthorizationDenied,
    OAuthProtocolError,
    PendingAuthorization,
    Pkce,
    Secret,
    parse_redirect,
)
from protocol.oauth.authorize import authorization_url, new_state, s256_challenge
from tests.support.oauth.fake import counter_random


def test_pkce_s256_rfc_7636_example() -> None:
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"  # RFC 7636 appendix B
    assert s256_challenge(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def test_pkce_and_state_from_the_random_source() -> None:
    pkce = Pkce.create(counter_random())
    verifier = pkce.verifier.reveal()
    assert len(verifier) == 43 and set(verifier) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    )
    assert pkce.challenge == s256_challenge(verifier)
    assert Pkce.create(counter_random()) == pkce  # deterministic with a fixed source
    assert Pkce.create() != Pkce.create()  # and fresh by default
    assert new_state() != new_state()


def test_authorization_url() -> None:
    pkce = Pkce.create(counter_random())
    url = authorization_url(
        "https://auth.example.com/authorize?tenant=t1",
        client_id="https://mcpd.example/client.json",
        redirect_uri="http://127.0.0.1:33418/callback",
        pkce=pkce,
        state="st",
        resource="https://mcp.example.com/mcp",
        scope="files:read offline_access",
    )
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "auth.example.com", "/authorize")
    query = parse_qs(parts.query)
    assert query == {
        "tenant": ["t1"],
        "response_type": ["code"],
        "client_id": ["https://mcpd.example/client.json"],
        "redirect_uri": ["http://127.0.0.1:33418/callback"],
        "code_challenge": [pkce.challenge],
        "code_challenge_method": ["S256"],
        "state": ["st"],
        "scope": ["files:read offline_access"],
        "resource": ["https://mcp.example.com/mcp"],
    }
    no_scope = authorization_url(
        "https://a/authorize",
        client_id="c",
        redirect_uri="http://127.0.0.1/cb",
        pkce=pkce,
        state="s",
        resource="https://m",
        scope=None,
    )
    assert "scope" not in parse_qs(urlsplit(no_scope).query)
    with pytest.raises(OAuthProtocolError, match="fragment"):
        authorization_url(
            "https://a/authorize#x",
            client_id="c",
            redirect_uri="http://127.0.0.1/cb",
            pkce=pkce,
            state="s",
            resource="https://m",
            scope=None,
        )


def _pending(iss_supported: bool = True) -> PendingAuthorization:
    return PendingAuthorization(
        url="https://auth.example.com/authorize?...",
        state=Secret("the-state"),
        verifier=Secret("v" * 43),
        issuer="https://auth.example.com",
        iss_supported=iss_supported,
        redirect_uri="http://127.0.0.1:33418/callback",
        client_id="c",
        resource="https://mcp.example.com/mcp",
        scopes=None,
    )


CB = "http://127.0.0.1:33418/callback"
ISS = "iss=https%3A%2F%2Fauth.example.com"


def test_a_good_redirect() -> None:
    code = parse_redirect(f"{CB}?code=abc&state=the-state&{ISS}", _pending())
    assert code.code.reveal() == "abc" and code.iss == "https://auth.example.com"
    # as a loopback listener sees it
    assert parse_redirect(f"/callback?code=abc&state=the-state&{ISS}", _pending()).code == Secret(
        "abc"
    )


@pytest.mark.parametrize(
    ("supported", "iss", "ok"),
    [
        (True, "https://auth.example.com", True),
        (True, None, False),
        (False, None, True),
        (False, "https://auth.example.com", True),
        (False, "https://evil.example.com", False),
        (True, "https://evil.example.com", False),
        (True, "https://auth.example.com/", False),
        (True, "https://AUTH.example.com", False),
        (True, "https://auth.example.com:443", False),
        (True, "https://auth%2Eexample.com", False),
    ],
)
def test_iss_table(supported: bool, iss: str | None, ok: bool) -> None:
    from urllib.parse import quote

    url = f"{CB}?code=abc&state=the-state" + (f"&iss={quote(iss, safe='')}" if iss else "")
    if ok:
        parse_redirect(url, _pending(supported))
    else:
        with pytest.raises(OAuthProtocolError, match="RFC 9207"):
            parse_redirect(url, _pending(supported))


@pytest.mark.parametrize(
    ("url", "match"),
    [
        (f"{CB}?code=abc&{ISS}", "state"),
        (f"{CB}?code=abc&state=other&{ISS}", "state"),
        (f"{CB}?state=the-state&{ISS}", "no code"),
        (f"{CB}?code=&state=the-state&{ISS}", "no code"),
        (f"{CB}?code=a&code=b&state=the-state&{ISS}", "more than once"),
        (f"{CB}?code=a&state=the-state&{ISS}&{ISS}", "more than once"),
        (f"http://127.0.0.1:9999/callback?code=a&state=the-state&{ISS}", "came back to"),
        (f"http://127.0.0.1:33418/other?code=a&state=the-state&{ISS}", "came back to"),
    ],
)
def test_bad_redirects(url: str, match: str) -> None:
    with pytest.raises(OAuthProtocolError, match=match):
        parse_redirect(url, _pending())


def test_an_error_response() -> None:
    url = f"{CB}?error=access_denied&error_description=User%20said%20no&state=the-state&{ISS}"
    with pytest.raises(AuthorizationDenied, match=r"access_denied.*User said no") as info:
        parse_redirect(url, _pending())
    assert info.value.error == "access_denied"
    # with a foreign iss the error is not even looked at
    bad = url.replace("auth.example.com", "evil.example.com")
    with pytest.raises(OAuthProtocolError) as other:
        parse_redirect(bad, _pending())
    assert "said no" not in str(other.value)


def test_server_text_is_made_printable() -> None:
    url = f"{CB}?error=x%0Ay&error_description={'z' * 500}&state=the-state&{ISS}"
    with pytest.raises(AuthorizationDenied) as info:
        parse_redirect(url, _pending())
    assert "\n" not in str(info.value) and len(str(info.value)) < 300
