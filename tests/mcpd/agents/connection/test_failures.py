"""A fault in mcpd while handling one line: the request is answered with an internal
error naming the exception's type and never its text, what answers nothing is logged
and dropped, and an agent that makes mcpd fail at will cannot flood the log."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from mcpd.agents.connection.failures import Failures, failure_message, kind_of, split_failure
from protocol.jsonrpc import messages as rpc

SECRET = "sk-live-do-not-show"


def answer(reply: bytes) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(reply)
    assert decoded["error"]["code"] == rpc.INTERNAL_ERROR
    assert SECRET not in reply.decode()
    return decoded


def records(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mcpd.agents"]


def test_the_kind_told_is_the_type_and_a_lone_exception_of_a_group_is_unwrapped() -> None:
    assert kind_of(ValueError(SECRET)) == "ValueError"
    nested = ExceptionGroup("", [ExceptionGroup("", [KeyError(SECRET)])])
    assert kind_of(nested) == "KeyError"
    assert kind_of(ExceptionGroup("", [KeyError(), ValueError()])) == "ExceptionGroup"
    message = failure_message(ExceptionGroup("", [OSError(SECRET)]))
    assert message.startswith("Internal error: mcpd failed on this request (OSError)")
    assert SECRET not in message


def test_a_request_is_answered_under_its_id_and_the_fault_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    line = rpc.encode_request(9, "tools/call", {"name": "t"})
    with caplog.at_level(logging.ERROR, "mcpd.agents"):
        found = Failures().of_line("agent 3", line, TypeError(SECRET))
    assert found is not None
    reply, rid = found
    assert rid == 9 and answer(reply)["id"] == 9
    assert "(TypeError)" in answer(reply)["error"]["message"]
    assert records(caplog) == [
        "mcpd failed on agent 3's tools/call (TypeError); answered with an internal error"
    ]
    assert caplog.records[-1].exc_info is not None


def test_a_notification_or_an_answer_to_a_server_is_dropped_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = Failures()
    with caplog.at_level(logging.ERROR, "mcpd.agents"):
        note = rpc.encode_notification("notifications/cancelled", {"requestId": 1})
        assert guard.of_line("a", note, ValueError(SECRET)) is None
        assert guard.of_line("a", b'{"jsonrpc":"2.0","id":4,"result":{}}', ValueError()) is None
    assert records(caplog) == [
        "mcpd failed on a's notifications/cancelled (ValueError); dropped",
        "mcpd failed on a's answer to a server (ValueError); dropped",
    ]


@pytest.mark.parametrize("line", [b"[1, 2]", b"{not json", b'{"id": 1}'])
def test_a_line_that_cannot_be_read_again_is_answered_with_no_id(line: bytes) -> None:
    found = Failures().of_line("a", line, RuntimeError(SECRET))
    assert found is not None
    reply, rid = found
    assert rid is None and answer(reply)["id"] is None


def test_failures_at_will_are_logged_a_few_at_once(caplog: pytest.LogCaptureFixture) -> None:
    guard = Failures()
    with caplog.at_level(logging.ERROR, "mcpd.agents"):
        for rid in range(50):
            answer(guard.reply("a", rid, "tools/call", ValueError(SECRET)))
    assert 1 <= len(records(caplog)) < 10


def test_only_the_exception_part_of_what_ended_a_request_is_answered() -> None:
    error = ValueError()
    assert split_failure(error) == (error, None)
    interrupt = KeyboardInterrupt()
    assert split_failure(interrupt) == (None, interrupt)
    mixed = BaseExceptionGroup("", [error, interrupt])
    failed, rest = split_failure(mixed)
    assert isinstance(failed, ExceptionGroup) and failed.exceptions == (error,)
    assert isinstance(rest, BaseExceptionGroup) and rest.exceptions == (interrupt,)
    only_rest = BaseExceptionGroup("", [interrupt])
    assert split_failure(only_rest) == (None, only_rest)
