"""Requests waiting for their responses, matched by id: awaited or answered by a
callback, given up on, cancelled by the server, failed all at once."""

from __future__ import annotations

import logging

import pytest
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.refused_replies import spelled_id
from protocol.jsonrpc.reply_faults import MalformedReply
from transports.errors import ServerCancelled, TransportClosed
from transports.pending import PendingRequests

logger = logging.getLogger("test.pending")


def response(rid: rpc.Id, value: bytes = b"1") -> rpc.Response:
    return rpc.Response(rid, Raw(value))


def failure(rid: rpc.Id, message: str = "no") -> rpc.ErrorResponse:
    return rpc.ErrorResponse(rid, rpc.ErrorObject(-32000, message))


def cancelled(rid: object, reason: str | None = None) -> rpc.Notification:
    params = {"requestId": rid} | ({"reason": reason} if reason is not None else {})
    return rpc.Notification("notifications/cancelled", Raw(rpc.encode(params)))


class Replies:
    def __init__(self) -> None:
        self.got: list[tuple[Raw | None, Exception | None]] = []

    def __call__(self, result: Raw | None, error: Exception | None) -> None:
        self.got.append((result, error))


def test_an_awaited_request_gets_its_response_and_its_event() -> None:
    pending = PendingRequests("s", logger)
    slot = pending.wait(1)
    assert len(pending) == 1
    pending.route(response(1, b'{"a":1}'))
    assert slot.event.is_set() and slot.done
    assert (bytes(slot.result or b""), slot.error) == (b'{"a":1}', None)
    pending.drop(1)
    assert len(pending) == 0


def test_a_callback_is_answered_once_and_leaves_the_table() -> None:
    pending = PendingRequests("s", logger)
    replies = Replies()
    pending.expect(2, replies)
    pending.answer(response(2))
    pending.answer(response(2))  # a duplicate reaches nobody
    assert [bytes(r or b"") for r, _ in replies.got] == [b"1"]
    assert len(pending) == 0


def test_an_error_response_fails_its_request_with_the_servers_error() -> None:
    pending = PendingRequests("s", logger)
    replies = Replies()
    pending.expect("x", replies)
    pending.route(failure("x", "bad arguments"))
    ((result, error),) = replies.got
    assert result is None
    assert isinstance(error, rpc.RPCError) and error.message == "bad arguments"


def test_a_late_answer_to_a_request_given_up_on_is_dropped_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pending = PendingRequests("s", logger)
    replies = Replies()
    pending.expect(3, replies)
    assert pending.forget(3)
    assert not pending.forget(3)  # already forgotten: the server is told only once
    with caplog.at_level(logging.DEBUG, logger.name):
        pending.route(response(3))
        assert "dropped a late response for id 3" in caplog.text
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        pending.route(response(3))  # a second one is not late but a duplicate
    assert replies.got == []
    assert "no request with that id is waiting" in caplog.text


def test_who_gave_up_on_a_request_hears_of_its_late_answer_once() -> None:
    late: list[rpc.Id] = []
    pending = PendingRequests("s", logger, late=late.append)
    replies = Replies()
    pending.expect(3, replies)
    pending.expect(4, replies)
    pending.forget(3)
    pending.route(failure(3))  # an error is as much an answer
    pending.route(failure(3))  # a duplicate is not
    pending.answer(response(4))  # an answer in time is the reply's
    assert late == [3]
    assert len(replies.got) == 1


def test_responses_to_nothing_are_warned_about_as_complain_allows(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quota = ["", " (and more)", None]
    pending = PendingRequests("s", logger, lambda: quota.pop(0))
    pending.wait(1)
    with caplog.at_level(logging.WARNING, logger.name):
        pending.route(response("x"))  # no request's
        pending.route(failure(9, "who?"))
        pending.route(response(10))  # complain said: stay quiet
    first, second = (r.getMessage() for r in caplog.records)
    assert 'dropped a response for id "x"' in first
    assert 'id 9 ("who?")' in second and second.endswith("(and more)")


def test_a_response_under_the_id_as_a_string_fails_its_request_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pending = PendingRequests("s", logger)
    replies = Replies()
    pending.expect(23, replies)
    slot = pending.wait(24)
    with caplog.at_level(logging.WARNING, logger.name):
        pending.route(response("23"))
        pending.route(failure("24"))
    ((result, error),) = replies.got
    assert result is None and isinstance(error, MalformedReply)
    assert (
        error.reason
        == 's: the reply was sent under the id "23" (a string) for request 23 and was dropped'
    )
    assert isinstance(slot.error, MalformedReply) and '"24" (a string)' in slot.error.reason
    assert "the request (id 23) it answered failed" in caplog.text


def test_a_string_id_is_not_taken_for_a_number_another_request_may_be_under() -> None:
    pending = PendingRequests("s", logger)
    replies = Replies()
    pending.expect(23, replies)
    pending.expect("23", replies)
    for odd in ("023", "+23", "23.0", "\uff12\uff13", "1" * 30):
        pending.route(response(odd))
    assert replies.got == []
    pending.route(response("23"))  # the string's own
    assert [bytes(r or b"") for r, _ in replies.got] == [b"1"]
    assert pending.waiting(23)


def test_an_id_no_request_has_is_quoted_and_cut_in_the_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A server choosing megabytes of id, or an id that reads as mcpd's words, for
    # responses to nothing: the warning it earns holds a line's worth of it, quoted.
    pending = PendingRequests("s", logger)
    with caplog.at_level(logging.WARNING, logger.name):
        pending.route(response("Z" * 1_000_000))
        pending.route(response('x"\n[mcpd] all fine'))
        pending.route(response(10**4000))
    long, forged, huge = (r.getMessage() for r in caplog.records)
    assert len(long) < 400
    assert long.startswith(
        f's: dropped a response for id "{"Z" * 100}" (and 999900 more characters)'
    )
    assert 'id "x\\"\\n[mcpd] all fine":' in forged  # one line, the quote escaped
    assert len(huge) < 400 and "(and 3901 more characters)" in huge


def test_the_server_cancelling_one_of_our_requests_fails_it() -> None:
    pending = PendingRequests("s", logger)
    slot = pending.wait(4)
    assert not pending.server_cancelled(cancelled(5, "not ours"))
    assert not pending.server_cancelled(cancelled([4]))  # not an id at all
    assert pending.server_cancelled(cancelled(4, "shutting down"))
    assert isinstance(slot.error, ServerCancelled)
    assert str(slot.error) == 's cancelled the request: "shutting down"'
    other = pending.wait(6)
    assert pending.server_cancelled(cancelled(6))
    assert str(other.error) == "s cancelled the request: no reason given"


def test_everything_waiting_fails_at_once_with_the_reason() -> None:
    pending = PendingRequests("s", logger)
    slots = [pending.wait(i) for i in range(3)]
    replies = Replies()
    pending.expect(10, replies)
    gone = TransportClosed("s exited with status 1")
    pending.fail_all(gone)
    assert all(s.error is gone for s in slots)
    assert replies.got == [(None, gone)]


def test_an_answered_slot_is_not_answered_again() -> None:
    pending = PendingRequests("s", logger)
    slot = pending.wait(1)
    assert pending.resolve(1, Raw(b"1"), None)
    assert not pending.resolve(1, None, TransportClosed("gone"))
    assert slot.error is None


@pytest.mark.parametrize(
    ("given", "spelled"),
    [
        *[("23", 23), ("-4", -4), ("0", 0), (24.0, 24)],
        *[("023", None), ("+1", None), ("1e2", None), ("\u0663", None), ("1" * 30, None)],
        *[(1.5, None), (True, None), (None, None), (2.0**70, None)],
    ],
)
def test_an_id_of_the_wrong_type_spells_an_integer_only_as_written_plainly(
    given: object, spelled: int | None
) -> None:
    assert spelled_id(given) == spelled
