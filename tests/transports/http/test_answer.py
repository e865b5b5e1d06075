"""Reading one request's 2xx reply (``AnswerReader``) on a connection over memory
streams: the JSON reply or the event stream up to the response, what is handed on or
answered on the way, and what a hostile server's reply costs (only its request)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing

from protocol.http.parts import ResponseHead
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply, MessageTooLarge
from transports.complaints import Complaints
from transports.errors import InvalidResponse, StreamCut, UnexpectedReply
from transports.http.answer import ANSWERED_ANOTHER, DRAIN_TIMEOUT, AnswerReader
from transports.http.connection import HttpConnection
from transports.http.inflight import InFlight
from transports.read_pace import ReadPace

LIMIT = 10
MAX_BODY = 4096
SSE = "text/event-stream"
JSON = "application/json"


def message(**members: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **members}).encode()


def event(data: bytes, kind: str = "message") -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


LAST_CHUNK = b"0\r\n\r\n"


@dataclass
class Exchange:
    """One request sent on a connection whose server side the test writes by hand."""

    conn: HttpConnection
    server: trio.StapledStream[trio.testing.MemorySendStream, trio.testing.MemoryReceiveStream]
    notes: list[rpc.Notification] = field(default_factory=list)

    async def head(self, media: str | None, *, extra: str = "", chunked: bool = True) -> None:
        lines = ["HTTP/1.1 200 OK"]
        if media is not None:
            lines.append(f"Content-Type: {media}")
        if chunked:
            lines.append("Transfer-Encoding: chunked")
        head = "\r\n".join(lines) + "\r\n" + extra + "\r\n"
        await self.server.send_all(head.encode())

    async def whole(self, media: str | None, body: bytes, *, extra: str = "") -> None:
        """A reply framed by its length, all of it sent at once."""
        await self.head(media, extra=f"{extra}Content-Length: {len(body)}\r\n", chunked=False)
        await self.server.send_all(body)

    async def send(self, data: bytes) -> None:
        await self.server.send_all(chunk(data))

    async def end(self) -> None:
        await self.server.send_all(LAST_CHUNK)

    def reader(
        self,
        rid: rpc.Id | None = 1,
        *,
        inflight: InFlight | None = None,
        on_request: Any = None,
        max_body: int = MAX_BODY,
    ) -> AnswerReader:
        return AnswerReader(
            "srv",
            "tools/call",
            rid,
            max_body,
            self.notes.append,
            on_request,
            complain=Complaints().admit,
            pace=ReadPace("srv", 1 << 20),
            inflight=inflight,
        )

    async def answer(self, reader: AnswerReader | None = None) -> rpc.Response | rpc.ErrorResponse:
        head: ResponseHead = await self.conn.receive_head()
        return await (reader or self.reader()).read(self.conn, head)


@asynccontextmanager
async def exchange() -> AsyncIterator[Exchange]:
    client, server = trio.testing.memory_stream_pair()
    conn = HttpConnection(client, "srv", None)
    with trio.fail_after(LIMIT):
        await conn.send(b"POST", b"/mcp", [], b"{}")
        yield Exchange(conn, server)


def result(rid: Any, value: Any = None) -> bytes:
    return message(id=rid, result={"v": value})


def note(n: int) -> bytes:
    return message(method="notifications/progress", params={"n": n})


def value(answer: rpc.Response | rpc.ErrorResponse) -> Any:
    assert isinstance(answer, rpc.Response)
    return json.loads(bytes(answer.result))["v"]


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# The JSON reply


async def test_a_json_reply_is_the_response() -> None:
    async with exchange() as ex:
        await ex.whole(JSON, result(1, "ok"))
        answer = await ex.answer()
    assert value(answer) == "ok"
    assert ex.conn.finished


async def test_a_json_error_reply_is_the_answer_also_without_an_id() -> None:
    body = message(id=None, error={"code": -32700, "message": "parse error"})
    async with exchange() as ex:
        await ex.whole("application/json; charset=utf-8", body)
        answer = await ex.answer()
    assert isinstance(answer, rpc.ErrorResponse)
    assert (answer.id, answer.error.message) == (None, "parse error")


async def test_a_json_notification_is_not_the_response() -> None:
    async with exchange() as ex:
        await ex.whole(JSON, note(1))
        with pytest.raises(UnexpectedReply) as info:
            await ex.answer()
    assert str(info.value) == "srv: the JSON reply to tools/call is not its response"
    assert ex.notes == []


async def test_a_json_response_for_no_request_in_flight_fails_its_request() -> None:
    inflight = InFlight("srv")
    inflight.expect(1)
    async with exchange() as ex:
        await ex.whole(JSON, result(7))
        with pytest.raises(MalformedReply) as info:
            await ex.answer(ex.reader(inflight=inflight))
    assert info.value.reason == (
        "srv: the reply was a response for no request in flight (id 7) and was dropped"
    )


@pytest.mark.parametrize(
    ("rid", "why"),
    [("1", 'sent under the id "1" (a string) for request 1'), (1.0, "sent under the id 1.0")],
)
async def test_a_json_response_under_its_own_id_of_the_wrong_type_fails_it(
    rid: Any, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with exchange() as ex:
        await ex.whole(JSON, result(rid))
        with pytest.raises(MalformedReply) as info:
            await ex.answer()
    assert info.value.reason.startswith(f"srv: the reply was {why}")
    assert len(warnings(caplog)) == 1


async def test_a_json_response_with_a_result_and_an_error_fails_its_request() -> None:
    body = message(id=1, result={}, error={"code": 1, "message": "no"})
    async with exchange() as ex:
        await ex.whole(JSON, body)
        with pytest.raises(MalformedReply) as info:
            await ex.answer()
    assert info.value.reason == (
        "srv: the reply was both a result and an error (JSON-RPC allows one) and was dropped"
    )


@pytest.mark.parametrize(
    ("rid", "why"),
    [
        ("2", 'sent under the id "2" (a string) for request 2'),
        (2, "sent in response to tools/call"),
    ],
)
async def test_a_json_reply_answering_another_in_flight_fails_both(rid: Any, why: str) -> None:
    inflight = InFlight("srv")
    other = inflight.expect(2)
    async with exchange() as ex:
        await ex.whole(JSON, result(rid))
        with pytest.raises(MalformedReply) as info:
            await ex.answer(ex.reader(inflight=inflight))
    assert info.value.reason == f"srv: the reply was {ANSWERED_ANOTHER} and was dropped"
    assert other.cancel_called
    with pytest.raises(MalformedReply) as failed:
        inflight.settled(2)
    assert failed.value.reason == f"srv: the reply was {why} and was dropped"


async def test_an_unusable_json_reply_to_a_notification_raises_without_an_id() -> None:
    body = message(id=1, result={}, error={"code": 1, "message": "no"})
    async with exchange() as ex:
        await ex.whole(JSON, body)
        with pytest.raises(UnexpectedReply) as info:
            await ex.answer(ex.reader(None))
    assert str(info.value) == (
        "srv: the JSON reply to tools/call was both a result and an error (JSON-RPC allows one)"
    )


async def test_a_json_reply_over_the_limit_fails_only_its_request() -> None:
    body = result(1, "x" * 100)
    async with exchange() as ex:
        await ex.whole(JSON, body)
        with pytest.raises(MessageTooLarge) as info:
            await ex.answer(ex.reader(max_body=50))
    assert (info.value.size, info.value.limit) == (len(body), 50)
    assert "was larger than the 50-byte line limit" in info.value.reason


async def test_a_body_in_a_coding_not_asked_for_is_refused() -> None:
    async with exchange() as ex:
        await ex.whole(JSON, b"\x1f\x8b junk", extra="Content-Encoding: gzip\r\n")
        with pytest.raises(UnexpectedReply) as info:
            await ex.answer()
    assert str(info.value) == "srv: the server sent a gzip-encoded body, which mcpd did not ask for"


@pytest.mark.parametrize(
    ("media", "said"),
    [("text/html", 'content type "text/html"'), (None, "lack of a content type")],
)
async def test_a_reply_of_another_media_type_is_refused_with_its_beginning(
    media: str | None, said: str
) -> None:
    body = b"<html>" + b"x" * 2000
    async with exchange() as ex:
        await ex.whole(media, body)
        with pytest.raises(UnexpectedReply) as info:
            await ex.answer()
    assert str(info.value) == f"srv: unexpected {said} for tools/call"
    assert info.value.body == body[:512]


# The event stream


async def test_notifications_before_the_response_are_handed_on_in_order() -> None:
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(b": priming\n\n" + event(note(1)) + event(note(2)))
        await ex.send(event(result(1, "done")))
        await ex.end()
        answer = await ex.answer()
    assert value(answer) == "done"
    assert [json.loads(bytes(n.params or b""))["n"] for n in ex.notes] == [1, 2]
    assert ex.conn.finished


async def test_events_mcp_does_not_use_and_empty_ones_are_skipped() -> None:
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(result(1, "other"), kind="ping") + b"data: \n\n")
        await ex.send(event(result(1, "mine")))
        await ex.end()
        assert value(await ex.answer()) == "mine"


async def test_the_stream_is_read_to_its_end_after_the_response() -> None:
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(result(1)))
        await ex.send(event(note(3)))
        await ex.end()
        await ex.answer()
    assert len(ex.notes) == 1
    assert ex.conn.finished


async def test_a_stream_that_does_not_end_after_the_response_is_left_soon(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(result(1)))
        start = trio.current_time()
        assert value(await ex.answer()) is None
        waited = trio.current_time() - start
    assert DRAIN_TIMEOUT <= waited < DRAIN_TIMEOUT + 1
    assert not ex.conn.finished


async def test_a_stream_that_ends_before_the_response_says_how_many_events_came() -> None:
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(note(1)) + event(note(2)))
        await ex.end()
        with pytest.raises(StreamCut) as info:
            await ex.answer()
    assert str(info.value) == (
        "srv: the event stream for tools/call ended before its response (2 events read)"
    )


async def test_a_stream_cut_before_the_response_says_so() -> None:
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(note(1)))
        await ex.server.aclose()
        with pytest.raises(StreamCut) as info:
            await ex.answer()
    assert str(info.value).startswith(
        "srv: the event stream for tools/call was cut before its response (1 events read)"
    )


async def test_an_event_over_the_limit_fails_only_its_request() -> None:
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(result(1, "x" * 200)))
        with pytest.raises(MessageTooLarge) as info:
            await ex.answer(ex.reader(max_body=100))
    assert (info.value.size, info.value.limit) == (None, 100)


async def test_an_event_that_is_not_json_rpc_makes_the_reply_unreadable() -> None:
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(b"not json"))
        with pytest.raises(UnexpectedReply, match="invalid JSON-RPC in the event stream"):
            await ex.answer()


async def test_a_server_request_on_the_stream_is_answered_before_reading_on() -> None:
    asked: list[str] = []

    async with exchange() as ex:

        async def on_request(req: rpc.Request) -> None:
            asked.append(req.method)
            # The server sends the response only once its request is answered.
            await ex.send(event(result(1, "after")))
            await ex.end()

        await ex.head(SSE)
        await ex.send(event(message(id=9, method="sampling/createMessage", params={})))
        answer = await ex.answer(ex.reader(on_request=on_request))
    assert value(answer) == "after"
    assert asked == ["sampling/createMessage"]


async def test_a_server_request_without_a_handler_is_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(message(id=9, method="roots/list")) + event(result(1)))
        await ex.end()
        await ex.answer()
    assert warnings(caplog) == [
        "srv: ignored server request roots/list on the stream of tools/call"
    ]


async def test_a_response_for_no_request_is_ignored_and_the_stream_read_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(result(5, "stray")) + event(result(1, "mine")))
        await ex.end()
        assert value(await ex.answer()) == "mine"
    assert warnings(caplog) == ["srv: ignored a response for id 5 on the stream of tools/call"]


async def test_a_response_under_its_own_id_of_the_wrong_type_fails_it_at_once() -> None:
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(result("1")))
        with pytest.raises(MalformedReply, match='under the id "1"'):
            await ex.answer()


async def test_an_unusable_response_on_the_stream_fails_its_request() -> None:
    bad = message(id=1, result={}, error={"code": 1, "message": "no"})
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(bad))
        with pytest.raises(MalformedReply, match="both a result and an error"):
            await ex.answer()


async def test_bad_duplicates_after_the_response_are_dropped() -> None:
    bad = message(id=1, result={}, error={"code": 1, "message": "no"})
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(result(1, "first")) + event(result("1")) + event(bad))
        await ex.end()
        assert value(await ex.answer()) == "first"


async def test_responses_on_the_stream_for_others_in_flight_fail_those_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inflight = InFlight("srv")
    others = {rid: inflight.expect(rid) for rid in (2, 3, 4)}
    bad = message(id=3, result={}, error={"code": 1, "message": "no"})
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(result(2.0)) + event(bad) + event(result(4)))
        await ex.send(event(result(1, "mine")))
        await ex.end()
        assert value(await ex.answer(ex.reader(inflight=inflight))) == "mine"
    assert all(scope.cancel_called for scope in others.values())
    reasons = []
    for rid in others:
        with pytest.raises(MalformedReply) as info:
            inflight.settled(rid)
        reasons.append(info.value.reason)
    assert "not an integer" in reasons[0]
    assert "both a result and an error" in reasons[1]
    assert "sent in response to tools/call" in reasons[2]
    assert not any("ignored" in w for w in warnings(caplog))


async def test_an_unusable_response_naming_no_request_makes_the_reply_no_mcp() -> None:
    bad = message(id=True, result={}, error={"code": 1, "message": "no"})
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(bad))
        with pytest.raises(InvalidResponse):
            await ex.answer()


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (
            message(id=8, result={}, error={"code": 1, "message": "no"}),
            "a response for id 8 that cannot be taken (both a result and an error "
            "(JSON-RPC allows one))",
        ),
        (
            b"[" + message(id=8, result={}) + b"," + message(id="9", result={}) + b"]",
            'a response for ids 8, "9" that cannot be taken (sent in a JSON-RPC batch (an '
            "array of messages, which is not taken))",
        ),
        (
            b'{"jsonrpc":"2.0","id":8,"id":9,"result":{}}',
            'a response for ids 8, 9 that cannot be taken (sent with more than one "id" (8, 9))',
        ),
    ],
    ids=["both members", "batch", "twice"],
)
async def test_an_unusable_response_for_ids_not_waited_for_is_ignored(
    bad: bytes, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    inflight = InFlight("srv")
    inflight.expect(1)
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(bad) + event(result(1)))
        await ex.end()
        await ex.answer(ex.reader(inflight=inflight))
    assert warnings(caplog) == [f"srv: ignored {said} on the stream of tools/call"]


async def test_the_response_marks_its_request_answered_in_flight() -> None:
    inflight = InFlight("srv")
    mine = inflight.expect(1)
    async with exchange() as ex:
        await ex.head(SSE)
        await ex.send(event(result(1)))
        await ex.end()
        await ex.answer(ex.reader(inflight=inflight))
    # A bad copy on another stream afterwards is a duplicate: it fails nothing.
    assert not inflight.refuse(1, "both a result and an error")
    assert not mine.cancel_called


async def test_a_failing_notification_handler_costs_no_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(msg: rpc.Notification) -> None:
        raise RuntimeError("handler bug")

    async with exchange() as ex:
        reader = AnswerReader(
            "srv",
            "tools/call",
            1,
            MAX_BODY,
            broken,
            complain=Complaints().admit,
            pace=ReadPace("srv", 1 << 20),
        )
        await ex.head(SSE)
        await ex.send(event(note(1)) + event(result(1, "ok")))
        await ex.end()
        assert value(await ex.answer(reader)) == "ok"
    assert warnings(caplog) == ["srv: notification handler failed on notifications/progress"]


async def test_the_decoder_is_kept_for_resuming_a_cut_stream() -> None:
    async with exchange() as ex:
        reader = ex.reader()
        await ex.head(SSE)
        await ex.send(b"id: e-7\nretry: 1500\n" + event(note(1)))
        await ex.server.aclose()
        with pytest.raises(StreamCut):
            await ex.answer(reader)
    assert (reader.decoder.resume_id, reader.decoder.retry) == ("e-7", 1500)
