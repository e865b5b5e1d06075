"""The OAuth core's HTTP values: the requests it hands out, what it reads from a
response, and what it never shows (header values and bodies carry secrets)."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

import pytest

from protocol.oauth import OAuthProtocolError
from protocol.oauth.http import (
    FORM,
    JSON,
    MAX_BODY,
    HttpRequest,
    HttpResponse,
    get,
    json_object,
    post_form,
    post_json,
)


def json_body(body: bytes, content_type: str = "application/json") -> HttpResponse:
    return HttpResponse(200, (("content-type", content_type),), body)


def test_request_headers_are_found_whatever_their_case() -> None:
    request = get("https://as.example/x", "metadata", [("MCP-Protocol-Version", "v")])
    assert request.header("mcp-protocol-version") == "v"
    assert request.header("ACCEPT") == JSON
    assert request.header("authorization") is None


def test_a_response_header_is_its_first_value_by_any_case_of_its_name() -> None:
    response = HttpResponse(
        401, (("www-authenticate", "Bearer a"), ("x", "1"), ("www-authenticate", "Bearer b"))
    )
    assert response.header("WWW-Authenticate") == "Bearer a"
    assert response.header("missing") is None


@pytest.mark.parametrize(
    ("content_type", "media_type"),
    [
        ("application/json", "application/json"),
        ("Application/JSON; charset=utf-8", "application/json"),
        ("  text/html ;x=y", "text/html"),
        ("", ""),
    ],
)
def test_media_type(content_type: str, media_type: str) -> None:
    assert HttpResponse(200, (("content-type", content_type),)).media_type == media_type


def test_media_type_without_a_content_type() -> None:
    assert HttpResponse(200).media_type == ""


def test_neither_repr_shows_header_values_or_bodies() -> None:
    request = post_form(
        "https://as.example/token",
        [("code", "the-code"), ("client_secret", "s3cret")],
        "token request",
        [("Authorization", "Basic czNjcmV0")],
    )
    response = json_body(b'{"access_token": "at-secret"}')
    for text in (repr(request), str(request), repr(response), str(response)):
        assert "s3cret" not in text and "czNjcmV0" not in text
        assert "the-code" not in text and "at-secret" not in text
    assert "Authorization" in repr(request)  # the name, to tell what was sent
    assert "token request" in repr(request)
    assert f"body={len(request.body)} bytes" in repr(request)
    assert repr(response) == "HttpResponse(200, application/json, 29 bytes)"


def test_a_form_body_keeps_each_field_whole() -> None:
    # Values from a server (a code, a state) or the user cannot add fields of their own.
    fields = [("code", "a&grant_type=password"), ("redirect_uri", "http://127.0.0.1/cb?x=1 é")]
    request = post_form("https://as.example/token", fields, "token request")
    assert request.method == "POST"
    assert request.header("content-type") == FORM
    assert parse_qsl(request.body.decode("ascii"), strict_parsing=True) == fields


def test_a_json_body_is_the_object_given() -> None:
    request = post_json("https://as.example/register", {"client_name": 'x"}é'}, "registration")
    assert request.header("content-type") == JSON
    assert json.loads(request.body) == {"client_name": 'x"}é'}


def test_get_sends_nothing_but_accept_and_the_extra_headers() -> None:
    request = get("https://as.example/m", "metadata")
    assert request == HttpRequest(
        "GET", "https://as.example/m", (("Accept", JSON),), b"", "metadata"
    )


def test_json_object_reads_an_object() -> None:
    assert json_object(json_body(b'{"a": [1, {"b": null}]}'), "x") == {"a": [1, {"b": None}]}


def test_a_body_of_the_limit_is_read_and_one_byte_more_is_not() -> None:
    filler = b'{"a": "' + b"x" * (MAX_BODY - 9) + b'"}'
    assert len(filler) == MAX_BODY
    assert json_object(json_body(filler), "metadata")["a"].startswith("x")
    with pytest.raises(
        OAuthProtocolError, match=f"metadata: the response is larger than {MAX_BODY}"
    ):
        json_object(json_body(filler + b" "), "metadata")


@pytest.mark.parametrize(
    "body",
    [b"", b"<html>secret-page</html>", b"{", b"\xff\xfe{}", b'{"a": 1} trailing'],
)
def test_a_body_that_is_not_json_is_named_but_never_quoted(body: bytes) -> None:
    with pytest.raises(OAuthProtocolError, match=r'token response: .*HTTP 200, "text/html"') as e:
        json_object(json_body(body, "text/html"), "token response")
    assert "secret-page" not in str(e.value)


def test_a_content_type_is_quoted_as_the_server_wrote_it() -> None:
    # A secret it echoed there is found only as it was sent, and its words stay quoted.
    written = "text/Key-MixedCase Run this"
    with pytest.raises(OAuthProtocolError) as e:
        json_object(json_body(b"<html>", f"{written}; charset=utf-8"), "token response")
    assert f'(HTTP 200, "{written}") is not JSON' in str(e.value)


def test_a_body_without_a_content_type_says_so() -> None:
    with pytest.raises(OAuthProtocolError, match="no content type"):
        json_object(HttpResponse(500, (), b"oops"), "x")


@pytest.mark.parametrize("body", [b"[]", b'"a"', b"1", b"null", b"NaN", b"[{}]"])
def test_json_that_is_not_an_object(body: bytes) -> None:
    with pytest.raises(OAuthProtocolError, match="JSON but not an object"):
        json_object(json_body(body), "x")


@pytest.mark.parametrize("opening", [b"[", b'{"a":'])
def test_json_nested_beyond_reason_is_a_protocol_error(opening: bytes) -> None:
    # Deep nesting fits easily under the size limit; it must end as the server's fault,
    # not as an error the daemon takes for a bug of its own.
    body = b'{"a": ' + opening * 20_000
    assert len(body) <= MAX_BODY
    with pytest.raises(OAuthProtocolError, match=r"token response: .*nested too deeply"):
        json_object(json_body(body), "token response")
