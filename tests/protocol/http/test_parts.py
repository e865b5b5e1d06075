"""HTTP's parts that do no I/O: URLs and origins, the headers a transport may send,
Retry-After, a reply's head, and the JSON-RPC error in a reply's body."""

from __future__ import annotations

import email.utils

import pytest
from msgspec import Raw

from protocol.http.parts import (
    Origin,
    ResponseHead,
    check_header,
    error_in,
    header_list,
    names_unknown_session,
    parse_retry_after,
    parse_url,
    same_origin,
)
from protocol.jsonrpc import messages as rpc


@pytest.mark.parametrize(
    ("url", "origin", "target", "authority"),
    [
        ("http://127.0.0.1:8080/mcp", Origin("http", "127.0.0.1", 8080), "/mcp", "127.0.0.1:8080"),
        (
            "https://Example.COM/mcp?k=v",
            Origin("https", "example.com", 443),
            "/mcp?k=v",
            "example.com",
        ),
        ("http://[::1]:9000", Origin("http", "::1", 9000), "/", "[::1]:9000"),
        ("http://[::1]/x", Origin("http", "::1", 80), "/x", "[::1]"),
        ("https://h:80/", Origin("https", "h", 80), "/", "h:80"),
    ],
)
def test_parse_url(url: str, origin: Origin, target: str, authority: str) -> None:
    assert parse_url(url) == (origin, target)
    assert origin.authority == authority


@pytest.mark.parametrize("url", ["mcp.example.com", "ws://x/", "http:///x", "http://h:99999/"])
def test_parse_url_refuses(url: str) -> None:
    with pytest.raises(ValueError):
        parse_url(url)


def test_parse_retry_after() -> None:
    now = 1_000_000_000.0
    assert parse_retry_after("120", now) == 120.0
    assert parse_retry_after(" 0 ", now) == 0.0
    assert parse_retry_after(email.utils.formatdate(now + 30, usegmt=True), now) == 30.0
    assert parse_retry_after(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0
    assert parse_retry_after("Sun, 09 Sep 2001 01:46:40 GMT", now) == 0.0
    for junk in (None, "", "soon", "-5", "1.5"):
        assert parse_retry_after(junk, now) is None


# A header's bytes are read as latin-1, where \xb2, \xb3 and \xb9 are digits to
# str.isdigit() but not to float(): a hostile server's Retry-After must not raise.
@pytest.mark.parametrize("value", ["\xb2", "1\xb3", "\xb9\xb9"])
def test_parse_retry_after_ignores_digits_other_than_ascii(value: str) -> None:
    assert parse_retry_after(value, 1_000_000_000.0) is None


def test_parse_url_refuses_credentials_in_the_url() -> None:
    with pytest.raises(ValueError, match="configure a header instead") as caught:
        parse_url("https://user:hunter2@h/mcp")
    assert "hunter2" not in str(caught.value)


# A password written as it is, with a character that ends the host: the parser fails on
# the "port" it sees, or takes part of the password for the host, the port or the path.
@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://user:hunter2/Zq9-SECRET@127.0.0.1:9/mcp", "its port is not a number"),
        ("http://user:hunter2?Zq9-SECRET@127.0.0.1:9/mcp", "its port is not a number"),
        ("http://user:hunter2#Zq9-SECRET@127.0.0.1:9/mcp", "its port is not a number"),
        ("http://user:hunter2%40Zq9-SECRET/mcp", "its port is not a number"),
        ("http://user:99999/Zq9-SECRET@127.0.0.1:9/mcp", "its port is not a number"),
        ("http://[user:hunter2@::1]/mcp", "its host is not a valid name or address"),
    ],
)
def test_a_url_parse_url_cannot_read_is_refused_without_its_parts(url: str, problem: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_url(url)
    said = str(caught.value)
    assert said.startswith("invalid URL ") and problem in said
    for part in ("user", "hunter2", "Zq9", "SECRET"):
        assert part not in said


ORIGIN = Origin("https", "mcp.example.com", 443)


@pytest.mark.parametrize(
    ("location", "target"),
    [
        ("/other", "/other"),
        ("next?x=1", "/a/next?x=1"),
        ("https://mcp.example.com/z", "/z"),
        ("https://MCP.example.com:443/z", "/z"),
        ("https://mcp.example.com:8443/z", None),
        ("http://mcp.example.com/z", None),
        ("https://evil.example/z", None),
        ("//evil.example/z", None),
        ("https://mcp.example.com:99999/", None),
    ],
)
def test_same_origin_follows_only_what_stays_on_the_origin(
    location: str, target: str | None
) -> None:
    assert same_origin(ORIGIN, "/a/b", location) == target


def test_check_header_refuses_what_h11_would_without_echoing_the_value() -> None:
    check_header("X-Token", "abc def")
    check_header("X-Empty", "")
    with pytest.raises(ValueError, match="invalid header name"):
        check_header("Bad Name", "x")
    with pytest.raises(ValueError) as caught:
        check_header("X-Token", "secret\r\nInjected: 1")
    assert "secret" not in str(caught.value)


def test_header_list_keeps_the_order_and_refuses_reserved_names() -> None:
    assert header_list({"B": "2", "A": "1"}, "configured", frozenset()) == [("B", "2"), ("A", "1")]
    with pytest.raises(ValueError, match="configured header HOST is set by the transport"):
        header_list({"HOST": "x"}, "configured", frozenset({"host"}))


def test_a_reply_head_reads_its_headers_by_lower_case_name() -> None:
    head = ResponseHead(
        200,
        "OK",
        [
            ("content-type", "Text/Event-Stream; charset=utf-8"),
            ("content-length", "12"),
            ("www-authenticate", "Bearer a"),
            ("www-authenticate", "Basic b"),
        ],
    )
    assert head.media_type == "text/event-stream"
    assert head.content_length == 12
    assert head.get("www-authenticate") == "Bearer a"
    assert head.get_all("www-authenticate") == "Bearer a, Basic b"
    assert head.get("location") is None
    odd = ResponseHead(200, "OK", [("content-length", "-1")])
    assert (odd.content_length, odd.media_type) == (None, "")


def test_error_in_finds_an_error_with_or_without_an_id() -> None:
    with_id = b'{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"bad"}}'
    without = b'{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"}}'
    assert error_in(with_id) == rpc.ErrorObject(-32600, "bad")
    found = error_in(without)
    assert found is not None and names_unknown_session(found)
    for other in (b"", b"<html>", b'{"jsonrpc":"2.0","id":1,"result":{}}', b"[" * 100_000):
        assert error_in(other) is None


def test_an_errors_data_is_kept_as_the_server_sent_it_on_one_line_whatever_its_id() -> None:
    # Kept as bytes, it is counted and scanned as any server's error data is before
    # anything decodes it.
    body = b'{"jsonrpc": "2.0", "id": true, "error": {"code": -32000, "message": "no",\n'
    body += b' "data": [[], [],\n   {"n": 1.50}]}}'
    found = error_in(body)
    assert found is not None and (found.code, found.message) == (-32000, "no")
    assert isinstance(found.data, Raw) and bytes(found.data) == b'[[],[],{"n":1.50}]'
    assert error_in(b'{"jsonrpc":"2.0","error":{"code":1,"message":"m","data":["\xff"]}}') is None


def test_an_unknown_session_is_told_by_its_words_only() -> None:
    assert names_unknown_session(rpc.ErrorObject(-32000, "Bad Request: No valid session ID"))
    assert not names_unknown_session(rpc.ErrorObject(-32000, "Bad Request: invalid params"))
