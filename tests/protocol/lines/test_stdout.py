"""A stdio server's stdout, cut into lines and each sent where it goes: responses to
their requests, notifications to their handler, the server's requests to whoever
answers them; what is too large or unreadable fails only the request it answered."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest
import trio.testing
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply, MessageTooLarge
from protocol.lines.stdout import FREE_OVERSIZED, StdoutReader
from protocol.pacing.read_budget import MAX_NOTIFICATION, cost, skipped
from tests.support.hostile.cut_secret import MARKER, SECRET, beginnings, guarded, padded
from transports.complaints import BURST, Complaints
from transports.errors import ServerCancelled
from transports.pending import PendingRequests

logger = logging.getLogger("test.reader")


class Stdout:
    """A reader with everything it hands on kept for the test to look at."""

    def __init__(
        self,
        max_line: int = 1024,
        *,
        withdraws: bool = False,
        on_notification: Callable[[rpc.Notification], None] | None = None,
        complain: Callable[[], str | None] | None = None,
    ) -> None:
        self.pending = PendingRequests("s", logger)
        self.notes: list[rpc.Notification] = []
        self.asked: list[rpc.Request] = []
        self.complaints = 0
        self._withdraws = withdraws
        self.reader = StdoutReader(
            "s",
            max_line,
            self.pending,
            complain or self._complain,
            on_notification or self.notes.append,
            self.asked.append,
            lambda msg: self._withdraws,
        )

    def _complain(self) -> str | None:
        self.complaints += 1
        return ""

    def answered(self, rid: rpc.Id) -> list[tuple[Raw | None, Exception | None]]:
        """What the request ``rid`` is answered, once it is."""
        got: list[tuple[Raw | None, Exception | None]] = []
        self.pending.expect(rid, lambda result, error: got.append((result, error)))
        return got


def line(msg: object) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def test_each_line_goes_where_it_belongs_whatever_the_chunks() -> None:
    out = Stdout()
    got = out.answered(1)
    data = (
        line({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
        + line({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"})
        + line({"jsonrpc": "2.0", "id": 1, "result": {"ok": True}})
    )
    for i in range(0, len(data), 7):
        out.reader.feed(data[i : i + 7])
    assert [n.method for n in out.notes] == ["notifications/progress"]
    assert [(r.id, r.method) for r in out.asked] == [("srv-1", "roots/list")]
    assert [(json.loads(bytes(r or b"")), e) for r, e in got] == [({"ok": True}, None)]


def test_a_last_line_without_its_newline_counts_once_stdout_ends() -> None:
    out = Stdout()
    got = out.answered(2)
    out.reader.feed(b'{"jsonrpc":"2.0","id":2,"result":7}')
    assert got == []
    out.reader.flush()
    assert [bytes(r or b"") for r, _ in got] == [b"7"]


def test_a_byte_order_mark_is_not_part_of_the_line() -> None:
    out = Stdout()
    got = out.answered(3)
    out.reader.feed(b"\xef\xbb\xbf" + line({"jsonrpc": "2.0", "id": 3, "result": 1}))
    assert [bytes(r or b"") for r, _ in got] == [b"1"]


def test_a_line_over_the_limit_fails_only_the_request_it_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    out = Stdout(max_line=64)
    big, small = out.answered(4), out.answered(5)
    with caplog.at_level(logging.WARNING):
        out.reader.feed(line({"jsonrpc": "2.0", "id": 4, "result": "x" * 500}))
        out.reader.feed(line({"jsonrpc": "2.0", "id": 5, "result": 1}))
    ((_, error),) = big
    assert isinstance(error, MessageTooLarge) and error.limit == 64
    assert [bytes(r or b"") for r, _ in small] == [b"1"]
    assert "the request (id 4) it answered failed, the server keeps running" in caplog.text


def test_a_line_over_the_limit_that_answers_a_request_is_free_of_the_pace_up_to_a_bound() -> None:
    """A real answer a server made too large is skipped at once; past a few times the
    limit, or naming no waiting request, its bytes cost what a flood's do."""
    out = Stdout(max_line=1024)
    out.answered(7)
    head = b'{"jsonrpc":"2.0","id":7,"result":"' + b"x" * 2048
    assert out.reader.feed(head) == 1.0  # its start, as a line: its bytes are free
    free = FREE_OVERSIZED * 1024 - len(head)
    assert out.reader.feed(b"x" * free) == 0.0
    assert out.reader.feed(b"x" * 4096) == skipped(4096)
    assert out.reader.feed(b'"}\n') == 1.0 + skipped(2)  # its end; the line break is not skipped
    stray = b'{"jsonrpc":"2.0","id":8,"result":"' + b"x" * 2048
    assert out.reader.feed(stray) == 1.0 + skipped(len(stray))


def test_a_line_over_the_limit_that_names_its_request_first_fails_it_before_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once past what an answer is read free for, the rest of such a line is read at
    the server's pace, which the request it answered does not wait for; the end of the
    line fails nothing more, nor is it complained of."""
    out = Stdout(max_line=64)
    big, other = out.answered(4), out.answered(5)
    with caplog.at_level(logging.WARNING):
        out.reader.feed(b'{"jsonrpc": "2.0", "id": 4, "result": "' + b"x" * 500)
        ((_, error),) = big
        assert isinstance(error, MessageTooLarge) and error.limit == 64
        out.reader.feed(b"x" * 500 + b'"}\n')
        out.reader.feed(line({"jsonrpc": "2.0", "id": 5, "result": 1}))
    assert [bytes(r or b"") for r, _ in other] == [b"1"]
    assert len(big) == 1 and out.complaints == 0
    assert caplog.text.count("the request (id 4) it answered failed") == 1


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (b'{"jsonrpc":"2.0","id":6,"result":"\xff"}\n', "not valid UTF-8"),
        (b'{"jsonrpc":"2.0","id":6,"result":' + b"[" * 2000 + b"]" * 2000 + b"}\n", "nested"),
    ],
)
def test_an_unreadable_reply_fails_its_request_at_once(reply: bytes, why: str) -> None:
    out = Stdout(max_line=1 << 20)
    got = out.answered(6)
    out.reader.feed(reply)
    ((result, error),) = got
    assert result is None and isinstance(error, MalformedReply)
    assert why in error.reason


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (
            b'{"jsonrpc":"2.0","id":6,"result":{},"error":{"code":-1,"message":"m"}}\n',
            "s: the reply was both a result and an error (JSON-RPC allows one) and was dropped",
        ),
        (
            b'{"jsonrpc":"2.0","id":6.0,"result":{}}\n',
            "s: the reply was sent under the id 6.0 (not an integer) for request 6 and was dropped",
        ),
        (
            b'{"jsonrpc":"2.0","id":"6","result":{}}\n',
            's: the reply was sent under the id "6" (a string) for request 6 and was dropped',
        ),
    ],
)
def test_a_reply_that_cannot_be_taken_fails_the_request_it_plainly_answered(
    reply: bytes, why: str
) -> None:
    out = Stdout()
    got, other = out.answered(6), out.answered(7)
    out.reader.feed(reply)
    ((result, error),) = got
    assert result is None and isinstance(error, MalformedReply) and error.reason == why
    assert other == [] and out.complaints == 0


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (
            b'{"jsonrpc":"2.0","id":6,"result":{"n":1e999999}}\n',
            "s: the reply was holding a number no JSON decoder reads (one past the largest "
            "double, about 1.8e308) and was dropped",
        ),
        (
            b'{"jsonrpc":"2.0","id":6,"id":"zzz","result":{}}\n',
            's: the reply was sent with more than one "id" (6, "zzz") and was dropped',
        ),
    ],
)
def test_a_reply_no_reader_takes_alike_fails_the_request_it_answered(
    reply: bytes, why: str
) -> None:
    out = Stdout(max_line=1 << 20)
    got, other = out.answered(6), out.answered(7)
    out.reader.feed(reply)
    ((result, error),) = got
    assert result is None and isinstance(error, MalformedReply) and error.reason == why
    assert other == [] and out.complaints == 0


def test_a_reply_giving_its_id_more_than_twice_fails_each_waiting_request_it_names() -> None:
    out = Stdout()
    first, second, other = out.answered(6), out.answered(7), out.answered(8)
    out.reader.feed(b'{"jsonrpc":"2.0","id":6,"id":7,"id":99,"result":{}}\n')
    for got in (first, second):
        ((result, error),) = got
        assert result is None and isinstance(error, MalformedReply)
        assert (
            error.reason
            == 's: the reply was sent with more than one "id" (6, 7, 99) and was dropped'
        )
    assert other == [] and out.complaints == 0


def test_a_reply_in_a_batch_fails_each_request_it_answered() -> None:
    out = Stdout()
    first, second, other = out.answered(6), out.answered(7), out.answered(8)
    out.reader.feed(
        b'[{"jsonrpc":"2.0","id":6,"result":{}},{"jsonrpc":"2.0","id":7,"error":{}},'
        b'{"jsonrpc":"2.0","id":99,"result":{}}]\n'
    )
    for got in (first, second):
        ((result, error),) = got
        assert result is None and isinstance(error, MalformedReply)
        assert error.reason == (
            "s: the reply was sent in a JSON-RPC batch (an array of messages, which is "
            "not taken) and was dropped"
        )
    assert other == [] and out.complaints == 0


def test_a_reply_that_cannot_be_taken_for_no_waiting_request_is_skipped() -> None:
    out = Stdout()
    got = out.answered(6)
    out.reader.feed(b'{"jsonrpc":"2.0","id":8,"result":{},"error":{"code":-1,"message":"m"}}\n')
    out.reader.feed(b'{"jsonrpc":"2.0","id":8.0,"result":{}}\n')
    assert got == [] and out.complaints == 2


def test_lines_that_are_not_json_rpc_are_skipped_and_complained_about() -> None:
    out = Stdout()
    out.reader.feed(b"Server listening on stdio\n[1, 2]\n")
    assert (out.notes, out.asked, out.complaints) == ([], [], 2)


def test_the_server_cancelling_our_request_or_withdrawing_its_own() -> None:
    out = Stdout()
    slot = out.pending.wait(8)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    out.reader.feed(line(cancel | {"params": {"requestId": 8, "reason": "busy"}}))
    assert isinstance(slot.error, ServerCancelled)
    # One the server withdraws of its own is not handed on either.
    withdrawing = Stdout(withdraws=True)
    withdrawing.reader.feed(line(cancel | {"params": {"requestId": "srv-2"}}))
    assert withdrawing.notes == []
    # Anything else cancelled is news for the handler.
    out.reader.feed(line(cancel | {"params": {"requestId": "unknown"}}))
    assert [n.method for n in out.notes] == ["notifications/cancelled"]


def test_a_failing_notification_handler_costs_nothing_else(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(msg: rpc.Notification) -> None:
        raise RuntimeError("handler bug")

    out = Stdout(on_notification=broken)
    got = out.answered(9)
    out.reader.feed(
        line({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
        + line({"jsonrpc": "2.0", "id": 9, "result": 1})
    )
    assert [bytes(r or b"") for r, _ in got] == [b"1"]
    assert "notification handler failed" in caplog.text


async def test_what_fails_no_request_is_logged_within_the_servers_budget(
    caplog: pytest.LogCaptureFixture, mock_clock: trio.testing.MockClock
) -> None:
    # Lines over the limit that answer nothing, notifications the handler fails on, junk:
    # a server can write them without pause. The clock stands still meanwhile.
    def broken(msg: rpc.Notification) -> None:
        raise RuntimeError("handler bug")

    out = Stdout(max_line=128, on_notification=broken, complain=Complaints().admit)
    flood = 100
    oversized = line({"jsonrpc": "2.0", "method": "x", "params": "x" * 500})
    failing = line({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    with caplog.at_level(logging.WARNING):
        out.reader.feed((oversized + failing + b"junk\n") * flood)
        said = [r.getMessage() for r in caplog.records]
        mock_clock.jump(1.0)
        out.reader.feed(oversized)
    assert len(said) == BURST
    assert "no waiting request could be told which it was" in said[0]
    assert said[1] == "s: notification handler failed on notifications/message"
    [after] = [r.getMessage() for r in caplog.records][BURST:]
    assert after.endswith(
        f"no waiting request could be told which it was ({3 * flood - BURST} more like this "
        "not logged)"
    )


def test_a_notification_larger_than_any_of_its_kind_needs_is_dropped() -> None:
    # A task's news may carry a call's result: it alone may be as large as a line.
    out = Stdout(max_line=4 << 20)
    big = "x" * (MAX_NOTIFICATION + 1)
    out.reader.feed(
        line({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": big}})
        + line({"jsonrpc": "2.0", "method": "notifications/tasks", "params": {"result": big}})
    )
    assert [n.method for n in out.notes] == ["notifications/tasks"]
    assert out.complaints == 1


def test_what_answered_a_waiting_request_costs_nothing_to_read() -> None:
    out = Stdout()
    out.answered(10)
    answer = line({"jsonrpc": "2.0", "id": 10, "result": 1})
    assert out.reader.feed(answer) == 0.0
    note = line({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})
    assert out.reader.feed(note + b"junk\n" + answer) == cost(note[:-1]) + cost(b"junk") + cost(
        answer[:-1]
    )  # the second answer waits for nobody


def test_blank_lines_cost_what_any_line_costs_to_read() -> None:
    out = Stdout()
    assert out.reader.feed(b"\n" * 1000) == 1000.0
    assert out.reader.feed(b" \r\n" * 1000) == 1000.0 + skipped(2000)
    got = out.answered(12)
    # Among them, an answer waited for still costs nothing.
    answer = line({"jsonrpc": "2.0", "id": 12, "result": 1})
    assert out.reader.feed(b"\n\n" + answer + b"\t\n") == 3.0 + skipped(1)
    assert len(got) == 1 and out.complaints == 0


def test_a_line_over_the_limit_costs_its_bytes_as_they_are_read_even_one_never_ended() -> None:
    out = Stdout(max_line=1024)
    # Reported as it passes the limit (a unit, as a line), its bytes so far skipped.
    assert out.reader.feed(b"{" + b"x" * 4095) == 1.0 + skipped(4096)
    for _ in range(3):
        assert out.reader.feed(b"x" * 65536) == skipped(65536)
    out.answered(11)
    # Its end (reported: a unit) and a reply waited for after it: the reply costs nothing.
    answer = line({"jsonrpc": "2.0", "id": 11, "result": 1})
    assert out.reader.feed(b"xx\n" + answer) == 1.0 + skipped(2)
    assert out.reader.feed(answer) == cost(answer[:-1])  # waited for by nobody now


@pytest.mark.parametrize(
    ("head", "tail", "warned"),
    [
        (b"", b"", "not JSON-RPC"),
        # A reply to a request waiting for it, unreadable: it fails, with its start quoted.
        (b'{"jsonrpc":"2.0","id":6,"result":"\xff', b'"}', "id 6"),
    ],
)
def test_a_line_quoted_in_a_warning_cut_inside_a_secret_shows_none_of_it_once_guarded(
    caplog: pytest.LogCaptureFixture, head: bytes, tail: bytes, warned: str
) -> None:
    out = Stdout(max_line=1 << 20)
    out.answered(6)
    before = len(head.decode("utf-8", "replace"))
    with caplog.at_level(logging.WARNING):
        out.reader.feed(head + padded(200 - before).encode() + tail + b"\n")
    [said] = [r.getMessage() for r in caplog.records]
    assert warned in said and SECRET[:-1] in said and SECRET not in said
    assert beginnings(guarded(said)) == [] and MARKER in guarded(said)
