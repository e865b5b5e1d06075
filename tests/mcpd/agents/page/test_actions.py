"""What every action on the page must carry before it is done: a session, the session's
CSRF token (as the script's header or a form field) and an Origin that is the page's own;
each refusal says which is missing, as JSON for the page's script. What a login or a
decision comes back with, from a server or its authorization server, is shown with each
character that hides or reorders text written out, as the page shows a server's words."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import cast

import h11
import pytest
import trio
import trio.testing

from mcpd.agents.daemon_seam import DaemonForAgents
from mcpd.agents.http.wire import Headers, Reject, Wire
from mcpd.agents.page.actions import MAX_FORM, NO_SESSION, Actions, checked_form
from mcpd.agents.page.assets import SECURITY_HEADERS
from mcpd.agents.page.opener import Opener
from mcpd.agents.page.passes import PageSession
from mcpd.agents.page.sources import NO_SOURCES, ApproveOrDeny, Sources
from mcpd.policy.deciders.kin import Decider
from mcpd.registry.profiles.views import ProfileView
from mcpd.servers.shared import LoginBegun, LoginDone
from protocol.jsonrpc import messages as rpc

SESSION = PageSession("the-csrf", 0.0, b"", 1000)
HOST = "127.0.0.1:8765"


def headers(**fields: str) -> Headers:
    base = {"host": HOST, "origin": f"http://{HOST}"}
    base.update({k.replace("_", "-"): v for k, v in fields.items()})
    return Headers((k.encode(), v.encode("latin-1")) for k, v in base.items())


def refusal(h: Headers, body: bytes, session: PageSession | None = SESSION) -> tuple[int, str]:
    with pytest.raises(Reject) as info:
        checked_form(h, body, session)
    return info.value.status, json.loads(info.value.body)["error"]


def test_a_form_with_the_token_in_a_field_passes() -> None:
    form = checked_form(headers(), b"csrf=the-csrf&id=7&decision=approve", SESSION)
    assert form == {"csrf": "the-csrf", "id": "7", "decision": "approve"}


def test_the_scripts_header_carries_the_token_too() -> None:
    form = checked_form(headers(x_mcpd_csrf="the-csrf"), b"server=notes", SESSION)
    assert form == {"server": "notes"}


def test_an_action_without_a_session_is_refused() -> None:
    assert refusal(headers(), b"csrf=the-csrf", None) == (403, NO_SESSION)


@pytest.mark.parametrize(
    ("h", "body"),
    [
        (headers(), b"id=7"),
        (headers(), b"csrf=other"),
        (headers(x_mcpd_csrf="other"), b"csrf=the-csrf"),  # the header is the one read
        (headers(), b"csrf="),
    ],
)
def test_an_action_without_the_sessions_csrf_token_is_refused(h: Headers, body: bytes) -> None:
    assert refusal(h, body) == (403, "this request does not carry the page's CSRF token")


@pytest.mark.parametrize(
    "origin",
    [
        "https://127.0.0.1:8765",
        "http://127.0.0.1:8766",
        "http://evil.example.test",
        "null",
        "",
    ],
)
def test_an_action_from_another_origin_is_refused(origin: str) -> None:
    assert refusal(headers(origin=origin), b"csrf=the-csrf") == (
        403,
        "this request does not come from the page itself",
    )


def test_an_action_without_an_origin_is_refused() -> None:
    h = Headers([(b"host", HOST.encode())])
    assert refusal(h, b"csrf=the-csrf")[1] == "this request does not come from the page itself"


def test_only_the_start_of_a_long_form_is_read() -> None:
    padding = b"pad=" + b"x" * MAX_FORM
    assert refusal(headers(), padding + b"&csrf=the-csrf")[0] == 403
    assert checked_form(headers(), b"csrf=the-csrf&" + padding, SESSION)["csrf"] == "the-csrf"


def test_a_refusal_is_json_with_the_pages_security_headers() -> None:
    with pytest.raises(Reject) as info:
        checked_form(headers(), b"", None)
    assert info.value.headers == [(b"content-type", b"application/json"), *SECURITY_HEADERS]


# -- what comes back from a login or a decision --

# A right-to-left override and a zero-width space: what follows reads backwards, or
# words hide, in a browser that draws them.
HIDING = "files\u202e gnol\u200bin"
WRITTEN_OUT = "files\\u202e gnol\\u200bin"


class Logins:
    def __init__(self, finished: LoginDone | None = None, said: str = HIDING) -> None:
        self.finished = finished
        self.said = said

    async def begin(self, alias: str, redirect_uri: str | None) -> LoginBegun | LoginDone:
        raise rpc.RPCError(-32000, f"{alias}: {self.said}")

    async def finish(self, alias: str, login_id: str, redirect: str) -> LoginDone:
        if self.finished is None:
            raise rpc.RPCError(-32000, self.said)
        return self.finished


class Daemon:
    def __init__(self, logins: Logins) -> None:
        self.logins = logins


async def answered(act: Callable[[Wire], Awaitable[None]]) -> tuple[int, bytes]:
    """What ``act`` answers one request with, as a browser receives it; a refusal as
    its status and body."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    client = h11.Connection(h11.CLIENT)
    raw = client.send(h11.Request(method="GET", target="/", headers=[("host", HOST)])) or b""
    raw += client.send(h11.EndOfMessage()) or b""
    wire = Wire(cast(trio.SocketStream, server_stream))
    with trio.fail_after(5):
        await client_stream.send_all(raw)
        assert await wire.read_request() is not None
        try:
            await act(wire)
        except Reject as refusal:
            return refusal.status, refusal.body
        status, body = 0, b""
        while not isinstance(event := client.next_event(), h11.EndOfMessage):
            if event is h11.NEED_DATA:
                client.receive_data(bytes(await client_stream.receive_some(1 << 16)))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
    return status, body


def shows_it_written_out(body: bytes) -> bool:
    """The page's script shows a JSON answer's words as text; a small page is HTML."""
    text = body.decode()
    if text.startswith("{"):
        answer = json.loads(text)
        text = answer.get("error") or answer["message"]
    return WRITTEN_OUT in text and "\u202e" not in text and "\u200b" not in text


def actions(logins: Logins, sources: Sources = NO_SOURCES) -> Actions:
    return Actions(cast(DaemonForAgents, Daemon(logins)), sources)


async def test_a_failed_login_shows_the_authorization_servers_words_written_out() -> None:
    page = actions(Logins())
    page._logins["files"] = "login-1"
    status, body = await answered(lambda w: page.landing(w, "files", "/?state=s", headers()))
    assert status == 400 and shows_it_written_out(body)


async def test_a_login_whose_server_is_not_ready_shows_its_reason_written_out() -> None:
    page = actions(Logins(LoginDone(server="files", state="failed", tools=0, reason=HIDING)))
    page._logins["files"] = "login-1"
    status, body = await answered(lambda w: page.landing(w, "files", "/?state=s", headers()))
    assert status == 200 and shows_it_written_out(body)


async def test_a_login_that_cannot_start_says_why_written_out() -> None:
    page = actions(Logins())
    body = b"csrf=the-csrf&server=files"
    h = headers(accept="application/json")
    status, said = await answered(
        lambda w: page.serve(w, "/page/login", h, body, SESSION, none, nobody)
    )
    assert status == 409 and shows_it_written_out(said)


async def test_a_login_shows_a_host_written_with_non_ascii_letters_in_ascii() -> None:
    said = "the authorization server https://\u0430ccounts.google.com/o refused"
    page = actions(Logins(said=said))
    body = b"csrf=the-csrf&server=files"
    h = headers(accept="application/json")
    status, started = await answered(
        lambda w: page.serve(w, "/page/login", h, body, SESSION, none, nobody)
    )
    page._logins["files"] = "login-1"
    _, landed = await answered(lambda w: page.landing(w, "files", "/?state=s", headers()))
    assert status == 409
    for text in (json.loads(started)["error"], landed.decode()):
        assert "\u0430" not in text and "https://xn--ccounts-1fg.google.com/o" in text
        assert "written with non-ASCII letters" in text


async def decided(
    id: str, decision: ApproveOrDeny, scope: ProfileView | None, opener: Opener
) -> str:
    return f"{id}: {HIDING}"


async def not_decided(
    id: str, decision: ApproveOrDeny, scope: ProfileView | None, opener: Opener
) -> str:
    raise rpc.RPCError(-32000, f"{id}: {HIDING}")


def none() -> None:
    return None


async def nobody() -> tuple[Decider, ...]:
    return ()  # who sends these requests is not found


@pytest.mark.parametrize("accept", ["application/json", "text/html"])
@pytest.mark.parametrize(("decide", "status"), [(decided, 200), (not_decided, 409)])
async def test_what_a_decision_comes_back_with_is_written_out(
    decide: Callable[[str, ApproveOrDeny, ProfileView | None, Opener], Awaitable[str]],
    status: int,
    accept: str,
) -> None:
    page = actions(Logins(), Sources(decide=decide))
    body = b"csrf=the-csrf&id=a-1&decision=approve"
    h = headers(accept=accept)
    got, said = await answered(
        lambda w: page.serve(w, "/page/decide", h, body, SESSION, none, nobody)
    )
    assert got == status and shows_it_written_out(said)
