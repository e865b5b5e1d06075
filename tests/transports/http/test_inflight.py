"""A Streamable HTTP transport's requests in flight (``InFlight``): a response from the
push stream kept as its request's answer (once, only while it waits), and one that
cannot be taken, or a sound one sent in response to another request, failing its request;
either ends the wait through the scope the request waits in."""

from __future__ import annotations

import json
import logging

import pytest
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply
from transports.http.inflight import InFlight

BOTH = "both a result and an error (JSON-RPC allows one)"


def response(rid: rpc.Id, value: object = None) -> rpc.Response:
    return rpc.Response(rid, Raw(json.dumps(value).encode()))


async def test_a_response_for_a_waiting_request_is_kept_once_and_ends_its_wait() -> None:
    inflight = InFlight("srv")
    scope = inflight.expect(1)
    first = response(1, "first")
    assert inflight.keep(first)
    assert scope.cancel_called
    assert not inflight.keep(response(1, "second"))
    # Its answer while it is in flight, however often asked for.
    assert inflight.kept(1) is first
    assert inflight.kept(1) is first
    assert inflight.settled(1) is first


async def test_an_error_response_kept_is_the_answer_not_a_failure() -> None:
    inflight = InFlight("srv")
    inflight.expect(1)
    error = rpc.ErrorResponse(1, rpc.ErrorObject(-32000, "no such tool"))
    assert inflight.keep(error)
    assert inflight.settled(1) is error


async def test_a_response_for_no_request_in_flight_is_not_kept() -> None:
    inflight = InFlight("srv")
    assert not inflight.keep(response(9))
    assert inflight.kept(9) is None


async def test_a_sound_response_under_an_id_of_the_wrong_type_fails_its_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inflight = InFlight("srv")
    scope = inflight.expect(7)
    with caplog.at_level(logging.WARNING, "mcpd.http"):
        assert inflight.keep(response("7"))
    assert scope.cancel_called
    with pytest.raises(MalformedReply) as info:
        inflight.settled(7)
    assert info.value.reason == (
        'srv: the reply was sent under the id "7" (a string) for request 7 and was dropped'
    )
    assert inflight.kept(7) is None
    assert len(caplog.messages) == 1


async def test_a_response_that_cannot_be_taken_fails_its_request_once() -> None:
    inflight = InFlight("srv")
    scope = inflight.expect(3)
    assert inflight.refuse(3, BOTH)
    assert scope.cancel_called
    with pytest.raises(MalformedReply) as info:
        inflight.settled(3)
    assert info.value.reason == f"srv: the reply was {BOTH} and was dropped"
    # Refused already: a second bad one is a duplicate.
    assert not inflight.refuse(3, BOTH)
    assert not inflight.misaddressed(3.0)


async def test_a_sound_response_sent_in_response_to_another_fails_the_one_it_names() -> None:
    inflight = InFlight("srv")
    scope = inflight.expect(2)
    assert inflight.elsewhere(2, "tools/call (id 1)")
    assert scope.cancel_called
    with pytest.raises(MalformedReply) as info:
        inflight.settled(2)
    assert info.value.reason == (
        "srv: the reply was sent in response to tools/call (id 1) and was dropped"
    )
    # Failed already: another is for a request in flight still, and fails it no more.
    assert inflight.elsewhere(2, "tools/call (id 3)")
    with pytest.raises(MalformedReply, match=r"\(id 1\)"):
        inflight.settled(2)
    answered = inflight.expect(4)
    inflight.answered(4)
    assert inflight.elsewhere(4, "tools/call (id 1)")
    assert not answered.cancel_called
    assert not inflight.elsewhere(9, "tools/call (id 1)")


async def test_after_its_own_response_or_one_kept_nothing_fails_a_request() -> None:
    inflight = InFlight("srv")
    answered = inflight.expect(1)
    inflight.answered(1)
    assert not inflight.refuse(1, BOTH)
    assert not inflight.misaddressed("1")
    assert not answered.cancel_called
    inflight.expect(2)
    answer = response(2)
    inflight.keep(answer)
    assert not inflight.refuse(2, BOTH)
    assert not inflight.misaddressed("2")
    assert inflight.settled(2) is answer


@pytest.mark.parametrize("given", [True, None, 1.5, "x", [1]])
async def test_an_id_that_names_no_waiting_request_fails_none(given: object) -> None:
    inflight = InFlight("srv")
    scope = inflight.expect(1)
    assert not inflight.refuse(given, BOTH)
    assert not inflight.misaddressed(given)
    assert not scope.cancel_called


async def test_a_dropped_request_is_forgotten_whole() -> None:
    inflight = InFlight("srv")
    inflight.expect(1)
    inflight.keep(response(1))
    inflight.drop(1)
    assert inflight.kept(1) is None
    assert not inflight.keep(response(1))
    assert not inflight.refuse(1, BOTH)
    # The same id, sent again, waits anew.
    again = inflight.expect(1)
    assert inflight.refuse(1, BOTH)
    assert again.cancel_called


async def test_an_id_answered_then_dropped_and_sent_again_may_be_failed_again() -> None:
    inflight = InFlight("srv")
    inflight.expect(4)
    inflight.answered(4)
    inflight.drop(4)
    again = inflight.expect(4)
    assert inflight.refuse(4, BOTH)
    assert again.cancel_called
