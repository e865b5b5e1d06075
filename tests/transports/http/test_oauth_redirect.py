"""The loopback listener ``mcpd auth login`` waits on for the browser: any local user
can reach it, so only the login's own answer counts."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from mcpd.cli.logins.auth_login import from_this_user
from protocol.oauth import FetchPolicy
from protocol.oauth.http import get
from tests.support.system.peer_user import needs_root, peer_uid, run_as
from transports.http.oauth_client import OAuthHttp
from transports.http.oauth_redirect import (
    CONNECTIONS,
    REQUEST_TIMEOUT,
    WAITING,
    redirect_listener,
)

LIMIT = 10


async def test_the_redirect_listener_takes_only_the_logins_own_answer() -> None:
    """Anyone on the machine can reach the loopback port: what does not carry the
    login's state gets an error page, and the listener waits on for the one that does."""
    http = OAuthHttp()
    policy = FetchPolicy(allow_loopback=True)

    async def status(url: str) -> int:
        return (await http.execute(get(url, "a request"), policy)).status

    with trio.fail_after(LIMIT):
        async with redirect_listener() as listener:
            callback = listener.redirect_uri
            # Before the login has started, nothing is its answer.
            assert await status(f"{callback}?code=early&state=s3cret") == 400
            listener.expect("s3cret")
            for stray, expected in [
                (f"{callback}?code=stolen&state=guessed", 400),
                (f"{callback}?code=stolen", 400),
                (f"{callback}?code=stolen&state=s3cret&state=guessed", 400),
                (f"{callback}?code=stolen&state=", 400),
                (callback.replace("/callback", "/elsewhere") + "?code=x&state=s3cret", 404),
            ]:
                assert await status(stray) == expected, stray
            assert await status(f"{callback}?code=mine&state=s3cret") == 200
            assert await listener.next() == "/callback?code=mine&state=s3cret"  # no stray


async def test_every_redirect_with_the_state_is_handed_on_once_in_turn() -> None:
    """The state can be read on its way to the browser, so a redirect that carries it
    may be someone else's: those after it are not lost, a reload is not handed on
    twice, and a flood is turned away rather than kept."""
    http = OAuthHttp()
    policy = FetchPolicy(allow_loopback=True)

    async def status(url: str) -> int:
        return (await http.execute(get(url, "a request"), policy)).status

    with trio.fail_after(LIMIT):
        async with redirect_listener() as listener:
            callback = listener.redirect_uri
            listener.expect("s3cret")
            assert await status(f"{callback}?code=theirs&state=s3cret") == 200
            assert await status(f"{callback}?code=mine&state=s3cret") == 200
            assert await status(f"{callback}?code=mine&state=s3cret") == 200  # a reload
            assert await listener.next() == "/callback?code=theirs&state=s3cret"
            assert await listener.next() == "/callback?code=mine&state=s3cret"
            for n in range(WAITING):
                assert await status(f"{callback}?code=flood{n}&state=s3cret") == 200
            assert await status(f"{callback}?code=more&state=s3cret") == 503
            assert await listener.next() == "/callback?code=flood0&state=s3cret"
            assert await status(f"{callback}?code=more&state=s3cret") == 200


async def test_a_connection_that_sends_no_request_is_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Someone who opens connections and sends nothing does not keep them for the
    whole login (the clock is a test clock: its minutes pass at once)."""
    async with redirect_listener() as listener:
        port = int(listener.redirect_uri.rsplit(":", 1)[1].split("/")[0])
        idle = await trio.open_tcp_stream("127.0.0.1", port)
        with trio.fail_after(REQUEST_TIMEOUT * 10):
            assert await idle.receive_some(100) == b""
        await idle.aclose()


async def test_a_flood_of_idle_connections_does_not_shut_the_browser_out() -> None:
    """Another local user keeping the listener full of connections that send nothing:
    it holds a bounded number, closing the oldest idle one for each newcomer, so the
    browser's redirect still gets through while the flood goes on."""
    http = OAuthHttp()
    policy = FetchPolicy(allow_loopback=True)
    with trio.fail_after(LIMIT):
        async with redirect_listener() as listener:
            listener.expect("s3cret")
            port = int(listener.redirect_uri.rsplit(":", 1)[1].split("/")[0])
            held = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(CONNECTIONS)]
            await trio.testing.wait_all_tasks_blocked()
            url = f"{listener.redirect_uri}?code=mine&state=s3cret"
            assert (await http.execute(get(url, "a request"), policy)).status == 200
            assert await listener.next() == "/callback?code=mine&state=s3cret"
            # The room was the oldest idle connection's. The browser's is answered and
            # gone, so one newcomer fills the listener again and the next displaces the
            # oldest idle one left.
            assert await held[0].receive_some(100) == b""
            later = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(2)]
            assert await held[1].receive_some(100) == b""
            for stream in [*later, *held]:
                await stream.aclose()


# Sends the redirect to the port in argv[1] and prints what comes back ("closed" for
# a connection closed unanswered).
SEND_REDIRECT = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
try:
    s.sendall(b"GET /callback?code=theirs&state=s3cret HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
    print(s.recv(100).decode().split("\\r\\n")[0] or "closed")
except ConnectionError:
    print("closed")
"""


@needs_root
async def test_mcpds_login_refuses_a_redirect_from_another_user() -> None:
    """``mcpd auth login``'s listener takes connections only from its own user, as the
    browser it opens is: another user with the state in hand is closed unanswered."""
    uid = peer_uid()
    with trio.fail_after(LIMIT):
        async with redirect_listener(admits=from_this_user) as listener:
            listener.expect("s3cret")
            port = listener.redirect_uri.rsplit(":", 1)[1].split("/")[0]
            assert (await run_as(uid, SEND_REDIRECT, port)).strip() == b"closed"
            assert (await run_as(0, SEND_REDIRECT, port)).strip() == b"HTTP/1.1 200"
            assert await listener.next() == "/callback?code=theirs&state=s3cret"


# Sends a whole redirect to the port in argv[1] and closes at once, before the
# listener can look who held the connection.
SEND_AND_CLOSE = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /callback?code=closed-first&state=s3cret HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
s.close()
"""


@needs_root
async def test_a_redirect_whose_sender_closed_before_it_was_looked_at_is_not_taken() -> None:
    """Closed at once, a connection has no holder left to name: one from this machine
    that no process holds is not taken, where a browser keeps its own open for the
    answer."""
    uid = peer_uid()
    with trio.fail_after(LIMIT):
        async with redirect_listener(admits=from_this_user) as listener:
            listener.expect("s3cret")
            port = listener.redirect_uri.rsplit(":", 1)[1].split("/")[0]
            for _ in range(3):
                await run_as(uid, SEND_AND_CLOSE, port)
            await trio.testing.wait_all_tasks_blocked(cushion=0.3)
            assert (await run_as(0, SEND_REDIRECT, port)).strip() == b"HTTP/1.1 200"
            assert await listener.next() == "/callback?code=theirs&state=s3cret"


async def test_the_redirect_listener_is_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback"):
        async with redirect_listener(host="0.0.0.0"):
            pass
