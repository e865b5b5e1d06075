"""What a page at an allowed origin is told: a preflight's answer (the methods of the
path, the headers mcpd reads, nothing else) and the headers every answer to its
requests carries; and that no other origin, no preflight and no status page path gets
those."""

from __future__ import annotations

import h11
import msgspec
import pytest

from mcpd.agents.http.cors import METHODS, answering, is_preflight, preflight
from mcpd.agents.http.http_side import ENDPOINTS
from mcpd.agents.http.tcp import own_origins
from mcpd.agents.http.wire import Headers

PORT = 8765
ORIGINS = own_origins(frozenset({"127.0.0.1"}), PORT, ["http://localhost:3000"])
APP = "http://localhost:3000"


def request(method: str, target: str, **headers: str) -> h11.Request:
    pairs = [("host", f"127.0.0.1:{PORT}"), *((k.replace("_", "-"), v) for k, v in headers.items())]
    return h11.Request(method=method, target=target, headers=pairs)


def asked(target: str = "/mcp", method: str = "POST", wanted: str | None = None) -> h11.Request:
    extra = {} if wanted is None else {"access_control_request_headers": wanted}
    return request("OPTIONS", target, origin=APP, access_control_request_method=method, **extra)


def answer(req: h11.Request) -> tuple[int, dict[bytes, bytes], bytes]:
    refusal = preflight(req, Headers(req.headers))
    return refusal.status, dict(refusal.headers), refusal.body


def test_a_preflight_is_an_options_request_with_an_origin_and_the_method_it_asks_for() -> None:
    def told(req: h11.Request) -> bool:
        return is_preflight(req, Headers(req.headers))

    assert told(asked())
    assert not told(request("OPTIONS", "/mcp", origin=APP))
    assert not told(request("OPTIONS", "/mcp", access_control_request_method="POST"))
    assert not told(request("POST", "/mcp", origin=APP, access_control_request_method="POST"))


def test_a_preflight_for_mcp_is_told_exactly_what_a_page_may_send() -> None:
    wanted = "authorization,content-type,mcp-protocol-version,mcp-method,mcp-name"
    status, headers, body = answer(asked(wanted=wanted))
    assert status == 204 and body == b""
    assert headers == {
        b"access-control-allow-origin": APP.encode(),
        b"vary": b"Origin",
        b"access-control-allow-methods": b"GET, POST, DELETE",
        b"access-control-allow-headers": (
            b"authorization, content-type, accept, mcp-protocol-version, mcp-session-id, "
            b"mcp-method, mcp-name"
        ),
        b"access-control-max-age": b"300",
    }
    assert b"access-control-allow-credentials" not in headers


def test_a_preflight_for_a_read_only_path_gets_its_methods() -> None:
    status, headers, _ = answer(asked("/status?profile=mail", "GET", "Authorization"))
    assert status == 204 and headers[b"access-control-allow-methods"] == b"GET, HEAD"
    assert answer(asked("/tools/", "GET"))[0] == 204


def test_every_path_mcpd_serves_but_the_page_has_its_methods_said() -> None:
    assert set(METHODS) == set(ENDPOINTS)


def test_the_param_headers_a_tool_asks_for_pass_by_name() -> None:
    status, headers, _ = answer(asked(wanted="Authorization, Mcp-Param-Region"))
    assert status == 204
    assert headers[b"access-control-allow-headers"].endswith(b", mcp-param-region")


@pytest.mark.parametrize(
    ("target", "method", "wanted", "status", "named"),
    [
        ("/mcp", "PUT", None, 403, "'PUT'"),
        ("/mcp", "post", None, 403, "'post'"),
        ("/status", "POST", None, 403, "'POST'"),
        ("/mcp", "POST", "authorization, cookie, x-forwarded-for", 403, "cookie, x-forwarded-for"),
        ("/mcp", "POST", "last-event-id", 403, "last-event-id"),
        ("/mcp/", "POST", None, 404, "/mcp/"),
        ("/nowhere", "GET", None, 404, "/nowhere"),
    ],
)
def test_a_preflight_for_what_mcpd_does_not_take_is_refused_naming_it(
    target: str, method: str, wanted: str | None, status: int, named: str
) -> None:
    got, headers, body = answer(asked(target, method, wanted))
    assert got == status and headers == {}
    assert named in msgspec.json.decode(body)["error"]


def carried(req: h11.Request) -> dict[bytes, bytes]:
    return dict(answering(ORIGINS)(req))


@pytest.mark.parametrize("origin", [APP, f"http://127.0.0.1:{PORT}", "HTTP://LOCALHOST:3000/"])
def test_an_answer_to_an_allowed_origin_names_it_and_what_the_page_may_read(origin: str) -> None:
    assert carried(request("POST", "/mcp", origin=origin)) == {
        b"access-control-allow-origin": origin.encode(),
        b"vary": b"Origin",
        b"access-control-expose-headers": b"Mcp-Session-Id, WWW-Authenticate",
    }


@pytest.mark.parametrize(
    "req",
    [
        request("POST", "/mcp"),
        request("POST", "/mcp", origin="http://evil.example"),
        request("POST", "/mcp", origin="null"),
        request("POST", "/mcp", origin=f"{APP}.evil.example"),
        h11.Request(method="POST", target="/mcp", headers=[("host", "x"), *[("origin", APP)] * 2]),
        request("GET", "/", origin=APP),
        request("GET", "/page/events", origin=APP, authorization="Bearer t"),
        request("POST", "/page/decide", origin=APP),
        asked(),
    ],
    ids=["none", "foreign", "null", "lookalike", "twice", "page", "events", "action", "preflight"],
)
def test_no_other_answer_lets_a_page_read_it(req: h11.Request) -> None:
    assert carried(req) == {}
