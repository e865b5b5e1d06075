"""Where an authorization server may send the browser back (``check_redirect_uri``):
https anywhere, plain http only on a loopback address, never with a fragment; a bad
one refused as a config error that quotes it."""

from __future__ import annotations

import pytest

from protocol.oauth.errors import OAuthConfigError
from protocol.oauth.flow_io import check_redirect_uri


@pytest.mark.parametrize(
    "uri",
    [
        "https://app.example/callback",
        "https://app.example:8443/cb?x=1",
        "http://127.0.0.1:8765/callback",
        "http://127.5.6.7/callback",
        "http://[::1]:9000/cb",
        "http://localhost:9000/cb",
    ],
)
def test_https_or_a_loopback_address_is_taken_as_it_is(uri: str) -> None:
    assert check_redirect_uri(uri) == uri


@pytest.mark.parametrize(
    "uri",
    ["http://app.example/callback", "http://10.0.0.1/cb", "http://127.0.0.1.example/cb"],
)
def test_plain_http_elsewhere_is_refused(uri: str) -> None:
    with pytest.raises(OAuthConfigError) as info:
        check_redirect_uri(uri)
    assert str(info.value) == f"redirect URI {uri!r} must be https or on a loopback address"


@pytest.mark.parametrize("uri", ["https://app.example/cb#frag", "http://127.0.0.1/cb#"])
def test_a_fragment_is_refused(uri: str) -> None:
    with pytest.raises(OAuthConfigError) as info:
        check_redirect_uri(uri)
    assert str(info.value) == f"redirect URI {uri!r} must not have a fragment"


@pytest.mark.parametrize("uri", ["ftp://app.example/cb", "not a url", "", "https://"])
def test_what_is_no_http_url_is_refused_as_a_config_error(uri: str) -> None:
    with pytest.raises(OAuthConfigError, match="redirect URI"):
        check_redirect_uri(uri)
