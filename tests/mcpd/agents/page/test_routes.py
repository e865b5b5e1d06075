"""The page's requests, answered by ``Page`` over an in-memory connection: who gets in
at the headers (the socket's reader, a session's cookie of this very port, a bearer
token, a one-time code on ``/`` only; an action never without a session; neither a
session nor a code for a process of mcpd's servers), what a code is traded for (an
HttpOnly, SameSite=Strict cookie, away from the address with the code, once), and what
other methods and paths get (405 with what is allowed, 404, no route around by an
encoded slash or a dotted path, a login's landing that echoes no markup)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import cast

import h11
import pytest
import trio
import trio.testing

from mcpd.agents.daemon_seam import DaemonForAgents
from mcpd.agents.entry.holders import HolderLookup
from mcpd.agents.entry.identity import Holder
from mcpd.agents.http.body_size import MAX_BODY
from mcpd.agents.http.exchange import RequestSender
from mcpd.agents.http.wire import Reject, Wire
from mcpd.agents.page import is_page
from mcpd.agents.page.actions import NO_SESSION
from mcpd.agents.page.routes import Access, Page
from mcpd.local.ownership.tcp_holder import HolderUnknown
from mcpd.policy.deciders.kin import AgentKin
from mcpd.servers.all_servers import AllServers
from mcpd.status_document import StatusDocument
from tests.support.page.stream import KEEP_ALIVE, requested
from tests.support.parts.status_rows import daemon, document, server_row

HOST = "127.0.0.1:8765"
COOKIE = "mcpd_page_8765"
STATUS = document(
    daemon(version="1.0", summary="1 server: 1 ready"), [server_row("files", state="ready")]
)


class Daemon:
    """What the page asks of the daemon to read itself and to let a browser in."""

    reads = 0  # of its status

    def http_token(self) -> str:
        return "endpoint-token"

    def status(self, scope: object = None, *, own_user: bool = False) -> StatusDocument:
        self.reads += 1
        return STATUS

    def history(self, scope: object = None) -> list[object]:
        return []


class Registry:
    def subscribe(self, changed: Callable[[], None]) -> None:
        pass


async def no_agents() -> list[AgentKin]:
    return []


def new_page() -> Page:
    return Page(cast(DaemonForAgents, Daemon()), cast(AllServers, Registry()), no_agents)


def passed_gate(request: h11.Request) -> None:
    """The endpoint's own check, which these requests have passed already."""


USER = 1000  # the local user at the other end of these connections


def owned_by(uid: int, server: str | None = None) -> HolderLookup:
    async def held() -> Holder:
        return Holder(uid, server, None if server is None else 4242)

    return HolderLookup(held)


SOCKET = RequestSender(None, holder=owned_by(USER))
ENDPOINT = RequestSender(None, guard=passed_gate, holder=owned_by(USER))


def request(
    method: str, target: str, headers: dict[str, str] | None = None, body: bytes = b""
) -> h11.Request:
    fields = {"host": HOST, **(headers or {})}
    if method == "POST":
        fields["content-length"] = str(len(body))
    return h11.Request(method=method, target=target, headers=list(fields.items()))


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def text(self) -> str:
        return self.body.decode()


async def exchange(
    page: Page, req: h11.Request, caller: RequestSender, body: bytes = b""
) -> Answer:
    """One request as the daemon serves it: admitted at its headers, then served; a
    refusal is answered with its status and body."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    client = h11.Connection(h11.CLIENT)
    raw = client.send(req) or b""
    if body:
        raw += client.send(h11.Data(data=body)) or b""
    raw += client.send(h11.EndOfMessage()) or b""
    wire = Wire(cast(trio.SocketStream, server_stream))
    with trio.fail_after(5):
        await client_stream.send_all(raw)
        head = await wire.read_head()
        assert head is not None
        try:
            access = await page.admit(head, caller)
            got = await wire.read_body()
            assert got is not None
            await page.serve(wire, head, got, caller, access, lambda: None)
        except Reject as refusal:
            fields = {k.decode(): v.decode() for k, v in refusal.headers}
            return Answer(refusal.status, fields, refusal.body)
        response: h11.Response | None = None
        out = b""
        while True:
            event = client.next_event()
            if event is h11.NEED_DATA:
                client.receive_data(await client_stream.receive_some(1 << 16))
            elif isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                out += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
    assert response is not None
    fields = {k.decode(): v.decode() for k, v in response.headers}
    return Answer(response.status_code, fields, out)


async def admitted(page: Page, req: h11.Request, caller: RequestSender) -> Access:
    return await page.admit(req, caller)


async def refused(page: Page, req: h11.Request, caller: RequestSender) -> Reject:
    with pytest.raises(Reject) as info:
        await page.admit(req, caller)
    return info.value


async def opened_session(page: Page) -> tuple[str, str]:
    """A session's cookie header, and its CSRF token."""
    traded = await exchange(page, request("GET", f"/?code={page.passes.issue()}"), ENDPOINT)
    assert traded.status == 200
    cookie = traded.headers["set-cookie"].split(";")[0]
    session = page.passes.session(cookie.partition("=")[2])
    assert session is not None
    return cookie, session.csrf


# -- who gets in, at the headers --


async def test_the_socket_serves_the_page_for_reading_without_a_session() -> None:
    page = new_page()
    assert await admitted(page, request("GET", "/"), SOCKET) == Access()
    answer = await exchange(page, request("GET", "/"), SOCKET)
    assert answer.status == 200
    assert '<meta name="mcpd-csrf"' not in answer.text and "files" in answer.text
    assert "content-security-policy" in answer.headers


async def test_no_action_without_a_session_on_either_side() -> None:
    page = new_page()
    for caller in (SOCKET, ENDPOINT):
        for path in ("/page/login", "/page/decide", "/page/release", "/"):
            no = await refused(page, request("POST", path, {"authorization": "Bearer x"}), caller)
            assert no.status == 403
            assert json.loads(no.body) == {"error": NO_SESSION}


async def test_the_endpoint_wants_a_session_a_token_or_a_code() -> None:
    page = new_page()
    no = await refused(page, request("GET", "/"), ENDPOINT)
    assert no.status == 401 and b"mcpd dashboard" in no.body
    assert (
        await admitted(page, request("GET", "/", {"authorization": "Bearer t"}), ENDPOINT)
        == Access()
    )
    assert await admitted(page, request("GET", "/?code=anything"), ENDPOINT) == Access()
    # A code opens a session on the page's address only.
    assert (
        await refused(page, request("GET", "/page/events?code=anything"), ENDPOINT)
    ).status == 401


async def test_a_session_is_found_by_its_cookie_on_its_own_port_only() -> None:
    page = new_page()
    cookie, _ = await opened_session(page)
    got = await admitted(page, request("GET", "/", {"cookie": f"a=b; {cookie}"}), ENDPOINT)
    assert got.session is not None and got.sid == cookie.partition("=")[2]
    elsewhere = request("GET", "/", {"cookie": cookie, "host": "127.0.0.1:9999"})
    assert (await refused(page, elsewhere, ENDPOINT)).status == 401
    forged = f"{COOKIE}=" + "A" * 43
    assert (await refused(page, request("GET", "/", {"cookie": forged}), ENDPOINT)).status == 401


# -- whose a session is --


async def unknown_owner() -> Holder:
    raise HolderUnknown("no process of this machine holds its other end")


async def test_a_session_is_taken_on_its_own_users_connections_only() -> None:
    page = new_page()
    cookie, csrf = await opened_session(page)
    again = RequestSender(None, guard=passed_gate, holder=owned_by(USER))
    assert (
        await admitted(page, request("GET", "/", {"cookie": cookie}), again)
    ).session is not None
    other = RequestSender(None, guard=passed_gate, holder=owned_by(USER + 1))
    read = await exchange(page, request("GET", "/", {"cookie": cookie}), other)
    assert read.status == 401 and "mcpd-csrf" not in read.text
    act = {"cookie": cookie, "origin": f"http://{HOST}", "x-mcpd-csrf": csrf}
    body = b"id=a-1&decision=approve"
    acted = await exchange(page, request("POST", "/page/decide", act, body), other, body)
    assert acted.status == 403 and json.loads(acted.body) == {"error": NO_SESSION}
    # On the socket too: another user allowed there has the cookie no better.
    on_socket = RequestSender(None, holder=owned_by(USER + 1))
    assert await admitted(page, request("GET", "/", {"cookie": cookie}), on_socket) == Access()


async def test_a_servers_process_has_no_session_and_trades_no_code_on_either_side() -> None:
    """One of mcpd's servers runs as its user: on the socket (let in by a profile's
    allow_servers) as on the endpoint, its process gets nothing with the cookie."""
    page = new_page()
    cookie, csrf = await opened_session(page)
    on_socket = RequestSender(None, holder=owned_by(USER, "thief"))
    on_endpoint = RequestSender(None, guard=passed_gate, holder=owned_by(USER, "thief"))
    act = {"cookie": cookie, "origin": f"http://{HOST}", "x-mcpd-csrf": csrf}
    body = b"id=a-1&decision=approve"
    for caller in (on_socket, on_endpoint):
        read = await exchange(page, request("GET", "/", {"cookie": cookie}), caller)
        assert read.status == 403 and "mcpd-csrf" not in read.text
        assert "the server &#x27;thief&#x27; (pid 4242)" in read.text
        acted = await exchange(page, request("POST", "/page/decide", act, body), caller, body)
        assert acted.status == 403 and "server 'thief'" in json.loads(acted.body)["error"]
    code = page.passes.issue()
    traded = await exchange(page, request("GET", f"/?code={code}"), on_endpoint)
    assert traded.status == 403 and "set-cookie" not in traded.headers
    # The user's own browser gets in with the same cookie, and with the code.
    assert (await admitted(page, request("GET", "/", {"cookie": cookie}), ENDPOINT)).session
    assert (await exchange(page, request("GET", f"/?code={code}"), ENDPOINT)).status == 200


async def test_a_planted_cookie_of_the_name_neither_locks_out_nor_is_taken() -> None:
    page = new_page()
    cookie, _ = await opened_session(page)
    theirs, _ = await exchange_as(page, USER + 1)
    for header in (f"{COOKIE}=planted; {cookie}", f"{theirs}; {cookie}", f"{cookie}; {theirs}"):
        answer = await exchange(page, request("GET", "/", {"cookie": header}), ENDPOINT)
        assert answer.status == 200 and "mcpd-csrf" in answer.text, header
    alone = await exchange(page, request("GET", "/", {"cookie": theirs}), ENDPOINT)
    assert alone.status == 401


async def exchange_as(page: Page, uid: int) -> tuple[str, str]:
    """A session traded on a connection of ``uid``: its cookie, and its CSRF token."""
    caller = RequestSender(None, guard=passed_gate, holder=owned_by(uid))
    traded = await exchange(page, request("GET", f"/?code={page.passes.issue()}"), caller)
    assert traded.status == 200
    cookie = traded.headers["set-cookie"].split(";")[0]
    session = page.passes.session(cookie.partition("=")[2])
    assert session is not None and session.uid == uid
    return cookie, session.csrf


async def test_where_the_owner_cannot_be_found_no_session_is_opened_or_taken() -> None:
    page = new_page()
    unknown = RequestSender(None, guard=passed_gate, holder=HolderLookup(unknown_owner))
    code = page.passes.issue()
    trade = await exchange(page, request("GET", f"/?code={code}"), unknown)
    assert trade.status == 403 and "set-cookie" not in trade.headers
    assert "cannot tell which user holds this connection" in trade.text
    assert "no process of this machine holds its other end" in trade.text
    cookie, csrf = await opened_session(page)
    read = await exchange(page, request("GET", "/", {"cookie": cookie}), unknown)
    assert read.status == 403 and "no process of this machine" in read.text
    act = {"cookie": cookie, "origin": f"http://{HOST}", "x-mcpd-csrf": csrf}
    acted = await exchange(page, request("POST", "/page/decide", act, b"x=1"), unknown, b"x=1")
    assert acted.status == 403 and "no process of this machine" in json.loads(acted.body)["error"]
    # A connection that says nothing of its owner is refused the same way.
    untold = RequestSender(None, guard=passed_gate)
    assert (await refused(page, request("GET", "/", {"cookie": cookie}), untold)).status == 403
    # The code was not spent: the browser on this machine still opens it.
    later = await exchange(page, request("GET", f"/?code={code}"), ENDPOINT)
    assert later.status == 200


async def test_the_owner_is_looked_up_once_a_connection_and_only_for_a_session() -> None:
    page = new_page()
    cookie, _ = await opened_session(page)
    asked: list[int] = []

    async def lookup() -> Holder:
        asked.append(USER)
        return Holder(USER)

    caller = RequestSender(None, guard=passed_gate, holder=HolderLookup(lookup))
    token = {"authorization": "Bearer t"}
    assert await admitted(page, request("GET", "/", token), caller) == Access()
    forged = {"cookie": f"{COOKIE}=" + "A" * 43, **token}
    assert await admitted(page, request("GET", "/", forged), caller) == Access()
    guessed = await exchange(page, request("GET", "/?code=guessed"), caller)
    assert guessed.status == 403
    assert asked == []
    for _ in range(3):
        assert (
            await admitted(page, request("GET", "/", {"cookie": cookie}), caller)
        ).session is not None
    assert asked == [USER]


# -- a code, traded for a session --


async def test_a_code_is_traded_once_for_a_strict_cookie_and_a_clean_address() -> None:
    page = new_page()
    code = page.passes.issue()
    traded = await exchange(page, request("GET", f"/?code={code}"), ENDPOINT)
    # On to the page by a step of the page's own, not a redirect: the cookie goes with
    # it, also where the browser came from a file: page (``mcpd dashboard``).
    assert traded.status == 200 and traded.headers["refresh"] == "0; url=/"
    assert '<a href="/">' in traded.text
    cookie = traded.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    again = await exchange(page, request("GET", f"/?code={code}"), ENDPOINT)
    assert again.status == 403 and "has been used" in again.text
    wrong = await exchange(page, request("GET", "/?code=guessed"), ENDPOINT)
    assert wrong.status == 403


async def test_a_head_for_the_address_with_a_code_leaves_the_code_to_the_browser() -> None:
    # A link preview or a checker asks for the headers first; the person's browser
    # that follows must still get in.
    page = new_page()
    code = page.passes.issue()
    head = await exchange(page, request("HEAD", f"/?code={code}"), ENDPOINT)
    assert head.status == 200 and "set-cookie" not in head.headers and head.body == b""
    traded = await exchange(page, request("GET", f"/?code={code}"), ENDPOINT)
    assert traded.status == 200 and traded.headers["set-cookie"].startswith(f"{COOKIE}=")


async def test_the_profile_kept_past_the_trade_cannot_add_a_header() -> None:
    page = new_page()
    target = f"/?code={page.passes.issue()}&profile=work%0d%0aSet-Cookie:%20x=y"
    traded = await exchange(page, request("GET", target), ENDPOINT)
    assert traded.status == 200
    assert traded.headers["refresh"] == "0; url=/?profile=work%0D%0ASet-Cookie%3A+x%3Dy"
    assert "x=y" not in traded.headers["set-cookie"]


async def test_a_session_reads_the_page_with_its_token() -> None:
    page = new_page()
    cookie, csrf = await opened_session(page)
    answer = await exchange(page, request("GET", "/", {"cookie": cookie}), ENDPOINT)
    assert answer.status == 200
    assert f'<meta name="mcpd-csrf" content="{csrf}">' in answer.text


# -- live updates --


async def test_open_pages_read_the_daemon_once_and_not_for_a_keep_alive(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two pages of the same reader open: one reading serves both, and the comments
    that keep their streams alive read nothing."""
    daemon = Daemon()
    page = Page(cast(DaemonForAgents, daemon), cast(AllServers, Registry()), no_agents)
    async with trio.open_nursery() as nursery:
        streams = []
        for _ in range(2):
            stream, wire, head = await requested()
            nursery.start_soon(page.serve, wire, head, b"", SOCKET, Access(), lambda: None)
            streams.append(stream)
        for stream in streams:
            assert "files" in (await stream.regions())["rows"]
        for stream in streams:
            assert [await stream.next(), await stream.next()] == [KEEP_ALIVE, KEEP_ALIVE]
        assert daemon.reads == 1
        nursery.cancel_scope.cancel()


# -- methods and paths --


async def test_a_head_answers_the_pages_headers_without_its_body() -> None:
    page = new_page()
    whole = await exchange(page, request("GET", "/"), SOCKET)
    head = await exchange(page, request("HEAD", "/"), SOCKET)
    assert head.status == 200 and head.body == b""
    assert head.headers["content-length"] == str(len(whole.body))


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/", "GET, HEAD"),
        ("DELETE", "/page/events", "GET"),
        ("HEAD", "/page/events", "GET"),  # a stream has no headers of its own to give
        ("GET", "/page/login", "POST"),
        ("GET", "/page/decide", "POST"),
        ("HEAD", "/page/release", "POST"),
    ],
)
async def test_a_wrong_method_is_told_what_is_allowed(method: str, path: str, allowed: str) -> None:
    page = new_page()
    cookie, _ = await opened_session(page)
    headers = {"cookie": cookie}
    answer = await exchange(page, request(method, path, headers), ENDPOINT)
    assert answer.status == 405
    assert answer.headers["allow"] == allowed


@pytest.mark.parametrize(
    "path",
    [
        "/page/",
        "/page/nothing",
        "/page/login/",
        "/page/login%2F",
        "/page/./login",
        "/page/x/../login",
    ],
)
async def test_no_other_path_under_the_page_is_served(path: str) -> None:
    page = new_page()
    cookie, csrf = await opened_session(page)
    for method in ("GET", "POST"):
        headers = {"cookie": cookie, "origin": f"http://{HOST}", "x-mcpd-csrf": csrf}
        answer = await exchange(page, request(method, path, headers), ENDPOINT)
        assert answer.status == 404, (method, path)


def test_an_encoded_slash_does_not_make_a_page_path() -> None:
    assert is_page(b"/") and is_page(b"/?code=x") and is_page(b"/page/login")
    for target in (b"/page%2Flogin", b"%2Fpage/login", b"//page/login", b"/pages/x", b"/status"):
        assert not is_page(target), target


async def test_a_landing_without_a_login_echoes_no_markup() -> None:
    page = new_page()
    alias = "%3Cscript%3Ealert(1)%3C%2Fscript%3E"
    answer = await exchange(page, request("GET", f"/page/oauth/{alias}?state=s"), ENDPOINT)
    assert answer.status == 404
    assert b"<script>alert" not in answer.body
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in answer.body


async def test_a_landing_needs_no_session_but_only_a_get() -> None:
    page = new_page()
    assert await admitted(page, request("GET", "/page/oauth/files?state=s"), ENDPOINT) == Access()
    answer = await exchange(page, request("POST", "/page/oauth/files"), ENDPOINT)
    assert answer.status == 404


# -- actions --


async def test_an_action_takes_the_token_and_the_pages_own_origin() -> None:
    page = new_page()
    cookie, csrf = await opened_session(page)
    body = b"id=a-1&decision=approve"
    own = {"cookie": cookie, "origin": f"http://{HOST}"}
    cases = [
        ({**own}, 403),  # no token
        ({**own, "x-mcpd-csrf": "forged"}, 403),
        ({**own, "x-mcpd-csrf": csrf, "origin": "http://localhost:8765"}, 403),
        ({**own, "x-mcpd-csrf": csrf, "origin": "null"}, 403),
        # Everything right, and nothing of that kind recorded here: said so.
        ({**own, "x-mcpd-csrf": csrf, "accept": "application/json"}, 404),
    ]
    for headers, status in cases:
        answer = await exchange(
            page, request("POST", "/page/decide", headers, body), ENDPOINT, body
        )
        assert answer.status == status, headers
        assert "error" in json.loads(answer.body)


async def test_a_body_past_the_limit_is_refused_unread() -> None:
    page = new_page()
    cookie, csrf = await opened_session(page)
    body = b"x" * (MAX_BODY + 1)
    headers = {"cookie": cookie, "origin": f"http://{HOST}", "x-mcpd-csrf": csrf}
    answer = await exchange(page, request("POST", "/page/decide", headers, body), ENDPOINT, body)
    assert answer.status == 413
