"""A reply that plainly answers a request but cannot be taken
(``protocol.jsonrpc.refused_replies``): which waiting request it answered (its id as
written, or the integer an id of the wrong type spells), why it is dropped, and the one
warning that says so."""

from __future__ import annotations

import logging

import pytest

from protocol.jsonrpc.refused_replies import (
    answered,
    misaddressed,
    named_twice,
    names_a_request,
    refusal,
    refuse_each,
    shown_id,
    spelled_id,
)
from protocol.jsonrpc.reply_faults import MalformedReply

WAITING = {23, "abc", 0, -5}


def waiting(rid: object) -> bool:
    return rid in WAITING


@pytest.mark.parametrize(
    ("given", "rid"),
    [
        ("23", 23),
        ("-5", -5),
        ("0", 0),
        (23.0, 23),
        (-0.0, 0),
        ("023", None),
        ("+23", None),
        ("23 ", None),
        ("2.0", None),
        ("", None),
        ("1" * 20, None),
        ("٣", None),
        (23.5, None),
        (float("inf"), None),
        (float("nan"), None),
        (2.0**63, None),
        (True, None),
        (None, None),
        ([23], None),
    ],
)
def test_the_integer_an_id_of_the_wrong_type_spells(given: object, rid: int | None) -> None:
    assert spelled_id(given) == rid


def test_a_reply_under_a_waiting_id_answers_it_with_the_reason_given() -> None:
    assert answered(23, "both a result and an error", waiting) == (
        23,
        "both a result and an error",
    )
    assert answered("abc", "why", waiting) == ("abc", "why")


def test_a_reply_under_an_id_of_the_wrong_type_answers_the_request_it_spells() -> None:
    assert answered("23", "ignored", waiting) == (
        23,
        'sent under the id "23" (a string) for request 23',
    )
    assert answered(23.0, "ignored", waiting) == (
        23,
        "sent under the id 23.0 (not an integer) for request 23",
    )


@pytest.mark.parametrize("given", [24, "24", 24.0, True, None, 1.5, {"id": 23}])
def test_a_reply_for_no_waiting_request_answers_none(given: object) -> None:
    assert answered(given, "why", waiting) is None


def test_true_is_never_taken_for_request_one() -> None:
    assert answered(True, "why", lambda rid: rid == 1) is None
    assert misaddressed(True, lambda rid: rid == 1) is None


def test_a_sound_reply_under_its_own_id_is_not_misaddressed() -> None:
    assert misaddressed(23, waiting) is None
    assert misaddressed("abc", waiting) is None


@pytest.mark.parametrize(
    ("given", "names"),
    [
        (1, True),
        ("x", True),
        ("7", True),
        (7.0, True),
        (True, False),
        (1.5, False),
        (None, False),
        ([], False),
    ],
)
def test_whether_an_id_names_a_request_at_all(given: object, names: bool) -> None:
    assert names_a_request(given) is names


@pytest.mark.parametrize(
    ("given", "shown"),
    [("23", '"23"'), (23.0, "23.0"), (None, "None"), (True, "True")],
)
def test_an_id_is_shown_as_written(given: object, shown: str) -> None:
    assert shown_id(given) == shown


def test_a_refusal_is_warned_of_once_and_names_the_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("mcpd.test.refusals")
    with caplog.at_level(logging.WARNING, log.name):
        failure = refusal("notes", 23, "not valid UTF-8", log)
    assert isinstance(failure, MalformedReply)
    assert failure.reason == "notes: the reply was not valid UTF-8 and was dropped"
    assert caplog.messages == [
        "notes: the reply was not valid UTF-8 and was dropped; the request (id 23) it "
        "answered failed, the server keeps running"
    ]
    assert caplog.records[0].__dict__["mcpd_event"] == "malformed_reply"


@pytest.mark.parametrize(
    ("line", "found"),
    [
        (b'{"jsonrpc":"2.0","id":23,"id":"zzz","result":{}}', ((23, "zzz"), '23, "zzz"')),
        (b'{"id":"nobody","result":{"id":1},"id":"abc"}', (("nobody", "abc"), '"nobody", "abc"')),
        (b'{"jsonrpc":"2.0","id":"zzz","result":{"id":23}}', None),  # 23 is the result's
        (b'{"jsonrpc":"2.0","id":7,"id":7,"id":1.5,"result":{}}', ((7, 7, 1.5), "7, 7, 1.5")),
        (b'{"jsonrpc":"2.0","id":23,"id":"zzz","result":' + b"9" * 5000 + b"}", None),
    ],
)
def test_a_response_giving_its_id_twice_names_each_id_it_gives(
    line: bytes, found: tuple[tuple[object, ...], str] | None
) -> None:
    got = named_twice(line)
    if found is None:
        assert got is None
    else:
        assert got == (found[0], f'sent with more than one "id" ({found[1]})')


def test_a_response_giving_thousands_of_ids_is_told_in_a_sentence_of_a_few() -> None:
    """Each id it gives is still tried, but what the agent and the journal are told
    names a few: a server cannot make the sentence as long as it likes."""
    line = (
        b'{"jsonrpc":"2.0",'
        + b'"id":7,' * 200_000
        + b'"id":["'
        + b"x" * 10_000
        + b'"],"result":{}}'
    )
    got = named_twice(line)
    assert got is not None
    ids, why = got
    assert len(ids) == 200_001 and ids[0] == 7
    assert why == 'sent with more than one "id" (7, 7, 7, 7 and 199997 more)'
    odd = named_twice(b'{"id":["' + b"x" * 10_000 + b'"],"id":1,"result":{}}')
    assert odd is not None and len(odd[1]) < 200, odd[1]


def test_each_waiting_request_a_reply_names_fails_and_no_other() -> None:
    still = {6, 7, 8}
    failed: list[tuple[object, str]] = []

    def refuse(given: object, why: str) -> bool:
        found = answered(given, why, still.__contains__)
        if found is None:
            return False
        still.discard(found[0])
        failed.append(found)
        return True

    assert refuse_each((6, "7", 99, 6, None), "w", refuse)
    assert failed == [(6, "w"), (7, 'sent under the id "7" (a string) for request 7')]
    assert still == {8}
    assert not refuse_each((99, True), "w", refuse)
