"""An HTTP connection on a profile's socket as a reload that removes the profile ends
it (``serve_until_left``, ``refusal``, ``Grace``), driven in process with a ``Leave``
and the server's end of a socket pair: what is refused and how, the grace a request in
flight is given and what it is told after, and when the connection closes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import h11
import pytest
import trio
import trio.testing

from mcpd.agents.entry.sockets import Leave
from mcpd.agents.http.leave import Grace, leaving_refusal, serve_until_left
from mcpd.agents.http.wire import Wire

REASON = "profile work was removed"
GRACE = 5.0


@pytest.fixture
async def wire() -> AsyncIterator[Wire]:
    a, b = trio.socket.socketpair()
    async with trio.SocketStream(a) as ours, trio.SocketStream(b):
        yield Wire(ours)


def post(target: bytes = b"/mcp") -> h11.Request:
    return h11.Request(method=b"POST", target=target, headers=[(b"host", b"mcpd")])


def asked() -> Leave:
    leave = Leave()
    leave.winds_down = True
    leave.ask(REASON, GRACE)
    return leave


REFUSED = f"{REASON}: this connection closes once its requests in flight are answered"


async def test_nothing_is_refused_off_a_profiles_socket_or_before_the_reload(wire: Wire) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    assert leaving_refusal(None, wire, post(), body) is None
    assert leaving_refusal(Leave(), wire, post(), body) is None
    assert not wire.leaving


async def test_a_request_once_the_reload_asked_is_refused_under_its_id(wire: Wire) -> None:
    body = b'{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":{}}'
    reject = leaving_refusal(asked(), wire, post(b"/mcp?x=1"), body)
    assert reject is not None and reject.status == 503
    assert json.loads(reject.body) == {
        "jsonrpc": "2.0",
        "id": "r1",
        "error": {"code": -32000, "message": REFUSED},
    }
    assert wire.leaving


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}',
        b'{"jsonrpc":"2.0","id":"s1","result":{}}',
    ],
    ids=["a-cancel", "an-answer-to-a-server"],
)
async def test_what_is_no_request_still_goes_through(wire: Wire, body: bytes) -> None:
    assert leaving_refusal(asked(), wire, post(), body) is None
    assert wire.leaving


@pytest.mark.parametrize("body", [b"{oops", b"", b"[]"])
async def test_a_body_that_is_no_message_is_refused_without_an_id(wire: Wire, body: bytes) -> None:
    reject = leaving_refusal(asked(), wire, post(), body)
    assert reject is not None and reject.status == 503
    assert json.loads(reject.body)["id"] is None


async def test_a_get_is_refused_without_an_id(wire: Wire) -> None:
    get = h11.Request(method=b"GET", target=b"/mcp", headers=[(b"host", b"mcpd")])
    reject = leaving_refusal(asked(), wire, get, b"")
    assert reject is not None
    assert json.loads(reject.body) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32000, "message": REFUSED},
    }


async def test_a_request_elsewhere_than_mcp_is_refused_in_plain_json(wire: Wire) -> None:
    reject = leaving_refusal(asked(), wire, post(b"/status"), b"")
    assert reject is not None and reject.status == 503
    assert json.loads(reject.body) == {"error": REFUSED}


async def test_off_a_profiles_socket_the_grace_never_ends_a_request() -> None:
    grace = Grace(None, None)
    scope = trio.CancelScope()
    await grace.keep(scope)
    assert not scope.cancel_called
    assert grace.late(1) is None


async def test_a_request_in_flight_is_cut_at_the_graces_end_and_told_why(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leave = Leave()
    leave.winds_down = True
    ended: list[float] = []
    grace = Grace(leave, lambda: ended.append(trio.current_time()))
    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(grace.keep, scope)
        await trio.sleep(1)
        assert grace.late(1) is None
        start = trio.current_time()
        leave.ask(REASON, GRACE)
        with scope:
            await trio.sleep_forever()
        waited = trio.current_time() - start
    assert waited == pytest.approx(GRACE)
    assert ended == [start]
    assert json.loads(grace.late(7) or b"") == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32000,
            "message": f"{REASON}, and this request was not answered in the 5 s it was given",
        },
    }


async def test_a_connection_waiting_for_its_next_request_closes_at_once(
    wire: Wire, autojump_clock: trio.testing.MockClock
) -> None:
    leave = Leave()
    served = trio.Event()

    async def serve() -> None:
        with leave.scope:
            served.set()
            await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_until_left, leave, wire, serve)
        await served.wait()
        assert leave.winds_down
        start = trio.current_time()
        leave.ask(REASON, GRACE)
    assert trio.current_time() == start
    assert wire.leaving


async def test_a_connection_mid_request_is_left_to_answer_and_closes_after_the_grace(
    wire: Wire, autojump_clock: trio.testing.MockClock
) -> None:
    leave = Leave()
    wire.conn.receive_data(b"POST /mcp HTTP/1.1\r\nhost: mcpd\r\ncontent-length: 2\r\n\r\n{}")
    assert isinstance(wire.conn.next_event(), h11.Request)
    closing: list[bool] = []
    answered = trio.Event()

    async def serve() -> None:
        with leave.scope:
            await answered.wait()
            await trio.sleep(GRACE + 1)
            closing.append(wire.closing)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_until_left, leave, wire, serve)
        await trio.testing.wait_all_tasks_blocked()
        leave.ask(REASON, GRACE)
        await trio.testing.wait_all_tasks_blocked()
        assert not leave.scope.cancel_called
        assert wire.leaving and not wire.closing
        answered.set()
    assert closing == [True]


async def test_off_a_profiles_socket_the_connection_is_served_as_it_is(wire: Wire) -> None:
    ran: list[bool] = []

    async def serve() -> None:
        ran.append(True)

    await serve_until_left(None, wire, serve)
    assert ran == [True]
    assert not wire.leaving
