"""The TCP endpoint's checks on their own: the URL hosts are told, the origins that are
the endpoint's own, the token and Origin and Host checks at a request's headers (what
a web page elsewhere, a stranger without the token and a broken token file each get),
and the lobby's door over socket pairs: a request let in, one refused with its status,
one whose headers never come, and one pushed out by newcomers."""

from __future__ import annotations

import logging

import h11
import pytest
import trio
import trio.testing

from mcpd.agents.http.cors import answering
from mcpd.agents.http.tcp import LOBBY_SIZE, Connect, EndpointDoor, endpoint_of, guard, own_origins
from mcpd.agents.http.wire import Reject, Wire
from mcpd.starting.listening import bind_endpoint

TOKEN = "s3cret-token"
PORT = 8765
# An endpoint that holds both loopback addresses, as for http_listen = "localhost:PORT".
BOTH = frozenset({"127.0.0.1", "[::1]", "localhost"})
ORIGINS = own_origins(BOTH, PORT, ["https://App.Example.com"])


def request(target: str = "/mcp", **headers: str) -> h11.Request:
    pairs = [("host", f"127.0.0.1:{PORT}")] if "host" not in headers else []
    pairs += [(k.replace("_", "-"), v) for k, v in headers.items()]
    # As they come off the wire: any byte but a line's end (h11 decodes none of them).
    return h11.Request(
        method="GET", target=target, headers=[(k, v.encode("latin-1")) for k, v in pairs]
    )


def check(req: h11.Request, token: str = TOKEN) -> int:
    """The status the request is refused with; 0 when it passes."""
    try:
        guard(lambda: token, ORIGINS)(req)
    except Reject as rejection:
        return rejection.status
    return 0


# -- where the endpoint is --


def test_the_url_puts_an_ipv6_host_in_brackets() -> None:
    assert Connect("127.0.0.1", 8765).url == "http://127.0.0.1:8765/mcp"
    assert Connect("::1", 8765).url == "http://[::1]:8765/mcp"


def test_the_own_origins_are_the_names_held_and_those_configured() -> None:
    assert own_origins(BOTH, 80, ["HTTP://Tool.Local:3000"]) == {
        "http://127.0.0.1:80",
        "http://localhost:80",
        "http://[::1]:80",
        "http://tool.local:3000",
    }
    assert own_origins(frozenset({"10.0.0.5"}), 9000) == {"http://10.0.0.5:9000"}


async def test_an_endpoint_asked_for_port_zero_says_the_port_it_got() -> None:
    listeners, connect = endpoint_of(bind_endpoint("127.0.0.1:0"))
    try:
        assert connect.host == "127.0.0.1" and connect.port > 0
        assert connect.port == listeners[0].socket.getsockname()[1]
    finally:
        for listener in listeners:
            await listener.aclose()


# -- the token --


@pytest.mark.parametrize(
    "authorization",
    [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER   {TOKEN}"],
)
def test_the_bearer_token_lets_a_request_in(authorization: str) -> None:
    assert check(request(authorization=authorization)) == 0


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        f"Basic {TOKEN}",
        f"Token {TOKEN}",
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        "Bearer s3cret-tokén",
        f"{TOKEN}",
    ],
)
def test_a_request_without_the_token_is_refused_saying_how_to_get_it(
    authorization: str | None,
) -> None:
    req = request() if authorization is None else request(authorization=authorization)
    with pytest.raises(Reject) as refused:
        guard(lambda: TOKEN, ORIGINS)(req)
    assert refused.value.status == 401
    assert b"mcpd token" in refused.value.body
    assert (b"www-authenticate", b'Bearer realm="mcpd"') in refused.value.headers


def test_a_token_that_cannot_be_read_refuses_everyone_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def unreadable() -> str:
        raise OSError("permission denied: /state/http-token")

    with pytest.raises(Reject) as refused:
        guard(unreadable, ORIGINS)(request(authorization=f"Bearer {TOKEN}"))
    assert refused.value.status == 503
    assert b"permission denied" in refused.value.body
    assert "permission denied" in caplog.text


# -- Origin and Host --


@pytest.mark.parametrize(
    "origin",
    [
        f"http://127.0.0.1:{PORT}",
        f"http://localhost:{PORT}/",
        f"HTTP://LOCALHOST:{PORT}",
        f"http://[::1]:{PORT}",
        "https://app.example.com",
    ],
)
def test_the_endpoints_own_origins_and_those_configured_pass(origin: str) -> None:
    assert check(request(origin=origin, authorization=f"Bearer {TOKEN}")) == 0


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        f"http://127.0.0.1:{PORT + 1}",
        "http://127.0.0.1",
        f"https://127.0.0.1:{PORT}",
        "null",
        "",
        "https://app.example.com.evil.example",
    ],
)
def test_a_foreign_origin_is_refused_even_with_the_token(origin: str) -> None:
    with pytest.raises(Reject) as refused:
        guard(lambda: TOKEN, ORIGINS)(request(origin=origin, authorization=f"Bearer {TOKEN}"))
    assert refused.value.status == 403 and b"Origin" in refused.value.body


@pytest.mark.parametrize("target", ["/", "/?profile=x", "/page/events", "/page/decide"])
def test_the_page_needs_no_token_when_its_host_is_the_endpoints(target: str) -> None:
    assert check(request(target)) == 0
    assert check(request(target, host=f"LOCALHOST:{PORT}")) == 0


@pytest.mark.parametrize(
    "host", [f"evil.example:{PORT}", "127.0.0.1", f"127.0.0.1:{PORT + 1}", None]
)
def test_the_page_is_refused_to_a_host_that_is_not_the_endpoint(host: str | None) -> None:
    """What a page elsewhere that rebinds its name to 127.0.0.1 sends (an HTTP/1.0
    request may send no Host at all)."""
    if host is None:
        req = h11.Request(method="GET", target="/", headers=[], http_version="1.0")
    else:
        req = h11.Request(method="GET", target="/", headers=[("host", host)])
    with pytest.raises(Reject) as refused:
        guard(lambda: TOKEN, ORIGINS)(req)
    assert refused.value.status == 403 and b"Host" in refused.value.body


def test_the_page_with_an_authorization_header_wants_the_token() -> None:
    assert check(request("/", authorization="Bearer wrong")) == 401
    assert check(request("/", authorization=f"Bearer {TOKEN}")) == 0


@pytest.mark.parametrize("target", ["/pages", "/page", "/status", "/mcp?page=/"])
def test_what_only_looks_like_the_page_wants_the_token(target: str) -> None:
    assert check(request(target)) == 401


# -- a browser's preflight --


def preflight(origin: str = "https://app.example.com", **headers: str) -> h11.Request:
    req = request(origin=origin, access_control_request_method="POST", **headers)
    return h11.Request(method="OPTIONS", target=req.target, headers=req.headers)


def test_a_preflight_from_an_allowed_origin_is_answered_without_the_token() -> None:
    with pytest.raises(Reject) as answered:
        guard(lambda: TOKEN, ORIGINS)(preflight())
    assert answered.value.status == 204
    assert (b"access-control-allow-origin", b"https://app.example.com") in answered.value.headers


@pytest.mark.parametrize(
    ("req", "status", "named"),
    [
        (preflight("http://evil.example"), 403, b"Origin"),
        (preflight("null"), 403, b"Origin"),
        (preflight(host=f"attacker.test:{PORT}"), 403, b"Host"),
        (preflight(host="127.0.0.1"), 403, b"Host"),
    ],
    ids=["foreign-origin", "null-origin", "rebound-host", "host-without-port"],
)
def test_a_preflight_from_elsewhere_is_refused_before_it_is_answered(
    req: h11.Request, status: int, named: bytes
) -> None:
    with pytest.raises(Reject) as refused:
        guard(lambda: TOKEN, ORIGINS)(req)
    assert refused.value.status == status and named in refused.value.body
    assert not any(name.startswith(b"access-control") for name, _ in refused.value.headers)


# -- the door --


def pair() -> tuple[Wire, trio.SocketStream]:
    a, b = trio.socket.socketpair()
    return Wire(trio.SocketStream(a)), trio.SocketStream(b)


def accept_all(request: h11.Request) -> None:
    pass


async def test_a_request_whose_headers_pass_is_let_in_with_its_body_unread() -> None:
    gate = EndpointDoor(guard(lambda: TOKEN, ORIGINS), lambda: 5.0)
    wire, client = pair()
    async with client, wire.stream:
        await client.send_all(
            b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            b"authorization: Bearer " + TOKEN.encode() + b"\r\ncontent-length: 5\r\n\r\nhello"
        )
        with trio.fail_after(5):
            head = await gate.admit(wire)
        assert head is not None and head.target == b"/mcp"
        assert await wire.read_body() == b"hello"


async def test_a_request_refused_at_its_headers_is_answered_and_let_go() -> None:
    gate = EndpointDoor(guard(lambda: TOKEN, ORIGINS), lambda: 5.0)
    wire, client = pair()
    async with client, wire.stream:
        await client.send_all(b"POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-length: 9\r\n\r\n")
        with trio.fail_after(5):
            assert await gate.admit(wire) is None
            await wire.stream.aclose()
            answer = b""
            while chunk := await client.receive_some(65536):
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 401 ")
    assert b"connection: close" in answer.lower() and b"mcpd token" in answer


async def test_a_refusal_to_an_allowed_origin_lets_its_page_read_it() -> None:
    gate = EndpointDoor(guard(lambda: TOKEN, ORIGINS), lambda: 5.0, answering(ORIGINS))
    wire, client = pair()
    async with client, wire.stream:
        await client.send_all(
            b"POST /mcp HTTP/1.1\r\nhost: x\r\norigin: https://app.example.com\r\n"
            b"authorization: Bearer wrong\r\ncontent-length: 9\r\n\r\n"
        )
        with trio.fail_after(5):
            assert await gate.admit(wire) is None
            await wire.stream.aclose()
            answer = b""
            while chunk := await client.receive_some(65536):
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 401 ")
    assert b"access-control-allow-origin: https://app.example.com\r\n" in answer
    assert b"access-control-expose-headers: Mcp-Session-Id, WWW-Authenticate\r\n" in answer


async def test_a_connection_that_sends_no_headers_in_time_is_let_go_and_said_so(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcpd.http")
    gate = EndpointDoor(accept_all, lambda: 7.0)
    wire, client = pair()
    async with client, wire.stream:
        await client.send_all(b"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")  # never ends
        with trio.fail_after(60):
            assert await gate.admit(wire) is None
    assert "within 7 s (daemon.http_header_timeout)" in caplog.text


async def test_a_connection_that_hangs_up_before_its_headers_is_let_go_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = EndpointDoor(accept_all, lambda: 5.0)
    wire, client = pair()
    async with wire.stream:
        await client.aclose()
        with trio.fail_after(5):
            assert await gate.admit(wire) is None
    assert "mcpd.http" not in {r.name for r in caplog.records}


async def test_a_request_cut_short_is_a_protocol_error_for_the_caller_to_answer() -> None:
    gate = EndpointDoor(accept_all, lambda: 5.0)
    wire, client = pair()
    async with wire.stream:
        await client.send_all(b"GET /mc")
        await client.aclose()
        with trio.fail_after(5), pytest.raises(h11.RemoteProtocolError):
            await gate.admit(wire)


async def test_a_full_lobby_pushes_out_its_longest_waiting_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each waiting connection holds a place (one that left with a broken request
    holds none); one more pushes out the first, which is let go, and the newcomer is
    served."""
    caplog.set_level(logging.WARNING, logger="mcpd.http")
    gate = EndpointDoor(accept_all, lambda: 600.0)
    broken, client = pair()
    async with broken.stream, client:
        await client.send_all(b"\x00\x01 not http\r\n\r\n")
        with trio.fail_after(5), pytest.raises(h11.RemoteProtocolError):
            await gate.admit(broken)
    pairs = [pair() for _ in range(LOBBY_SIZE + 1)]
    outcomes: dict[int, h11.Request | None] = {}

    async def admit(i: int) -> None:
        outcomes[i] = await gate.admit(pairs[i][0])

    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for i in range(LOBBY_SIZE):
                    nursery.start_soon(admit, i)
                    await trio.testing.wait_all_tasks_blocked()
                assert outcomes == {}
                nursery.start_soon(admit, LOBBY_SIZE)
                await trio.testing.wait_all_tasks_blocked()
                assert outcomes == {0: None}  # the first one in, pushed out
                await pairs[LOBBY_SIZE][1].send_all(b"GET /mcp HTTP/1.1\r\nhost: x\r\n\r\n")
                await trio.testing.wait_all_tasks_blocked()
                newcomer = outcomes[LOBBY_SIZE]
                assert newcomer is not None and newcomer.target == b"/mcp"
                nursery.cancel_scope.cancel()
    finally:
        for wire, client in pairs:
            await wire.stream.aclose()
            await client.aclose()
    assert caplog.text.count(f"more than {LOBBY_SIZE} waited for their headers") == 1
