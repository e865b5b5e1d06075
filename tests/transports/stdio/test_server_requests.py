"""The requests a stdio server sends mcpd: each answered in a task of its own on the
server's stdin, unless the server withdraws it or goes away first."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
import trio.testing
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.shown.visible import METHOD_SHOWN
from tests.support.hostile.cut_secret import MARKER, SECRET, beginnings, guarded, padded
from transports.base import MAX_ANSWERING, OVER_LIMIT
from transports.stdio.server_requests import Relays


class Stdin:
    """A server's stdin that the server reads only when the test says so."""

    def __init__(self, limit: int = 1 << 20) -> None:
        self.lines: list[dict[str, Any]] = []
        self.limit = limit
        self.queued = 0

    def __call__(self, line: bytes, what: str) -> None:
        self.lines.append(json.loads(line))
        self.queued += len(line) + 1


def quiet() -> str | None:
    return None


def request(rid: rpc.Id, method: str) -> rpc.Request:
    return rpc.Request(rid, method, None)


def withdrawal(rid: rpc.Id) -> rpc.Notification:
    params = Raw(rpc.encode({"requestId": rid, "reason": "no longer needed"}))
    return rpc.Notification("notifications/cancelled", params)


async def test_ping_and_requests_nobody_answers_are_answered_at_once() -> None:
    stdin = Stdin()
    relays = Relays("s", stdin, trio.Event(), stdin, quiet)
    relays.take(request(1, "ping"), None, None)
    relays.take(request(2, "roots/list"), None, None)
    assert stdin.lines[0] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert stdin.lines[1]["error"]["code"] == rpc.METHOD_NOT_FOUND


async def test_a_request_is_relayed_and_its_id_is_taken_until_answered() -> None:
    stdin = Stdin()
    release = trio.Event()

    async def handler(req: rpc.Request) -> object:
        await release.wait()
        return {"roots": []}

    relays = Relays("s", stdin, trio.Event(), stdin, quiet)
    async with trio.open_nursery() as nursery:
        relays.take(request("r", "roots/list"), handler, nursery)
        await trio.testing.wait_all_tasks_blocked()
        relays.take(request("r", "roots/list"), handler, nursery)  # the same id again
        assert stdin.lines == [
            {
                "jsonrpc": "2.0",
                "id": "r",
                "error": {"code": rpc.INVALID_REQUEST, "message": "id 'r' is in use"},
            }
        ]
        release.set()
    assert stdin.lines[1] == {"jsonrpc": "2.0", "id": "r", "result": {"roots": []}}


async def test_a_withdrawn_request_gets_no_answer() -> None:
    stdin = Stdin()
    stopped = trio.Event()

    async def handler(req: rpc.Request) -> object:
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()

    relays = Relays("s", stdin, trio.Event(), stdin, quiet)
    async with trio.open_nursery() as nursery:
        relays.take(request(7, "elicitation/create"), handler, nursery)
        await trio.testing.wait_all_tasks_blocked()
        assert not relays.withdrawn(withdrawal(8))  # not one being relayed
        assert relays.withdrawn(withdrawal(7))
        await stopped.wait()
    assert stdin.lines == []


async def test_no_answer_is_written_to_a_server_that_went_away() -> None:
    stdin = Stdin()
    closed = trio.Event()

    async def handler(req: rpc.Request) -> object:
        closed.set()  # the server exits while the answer is being made
        return {}

    relays = Relays("s", stdin, closed, stdin, quiet)
    async with trio.open_nursery() as nursery:
        relays.take(request(1, "sampling/createMessage"), handler, nursery)
    assert stdin.lines == []


async def test_a_server_that_asks_without_reading_its_stdin_is_not_answered_past_its_bound() -> (
    None
):
    stdin = Stdin(limit=4096)
    complaints: list[int] = []

    def complain() -> str | None:
        complaints.append(1)
        return ""

    relays = Relays("s", stdin, trio.Event(), stdin, complain)
    for i in range(10_000):
        relays.take(request(i, "ping"), None, None)
    # Every answer kept is one the server could have read; the rest were dropped.
    assert stdin.queued <= stdin.limit + len(b'{"jsonrpc":"2.0","id":9999,"result":{}}\n')
    assert len(stdin.lines) < 200
    assert len(complaints) == 10_000 - len(stdin.lines)
    # Once it reads again, it is answered again.
    stdin.queued = 0
    relays.take(request("again", "ping"), None, None)
    assert stdin.lines[-1] == {"jsonrpc": "2.0", "id": "again", "result": {}}


async def test_requests_past_those_being_answered_are_refused_at_once_naming_the_bound() -> None:
    stdin = Stdin()
    complaints: list[int] = []
    release = trio.Event()
    asked: list[rpc.Id] = []

    def complain() -> str | None:
        complaints.append(1)
        return "" if len(complaints) == 1 else None

    async def handler(req: rpc.Request) -> object:
        asked.append(req.id)
        await release.wait()
        return {"action": "decline"}

    relays = Relays("s", stdin, trio.Event(), stdin, complain)
    async with trio.open_nursery() as nursery:
        for i in range(MAX_ANSWERING + 500):
            relays.take(request(i, "elicitation/create"), handler, nursery)
        await trio.testing.wait_all_tasks_blocked()
        # The rest had their answers before any relayed one: at once, without a task.
        refused = stdin.lines
        assert [line["id"] for line in refused] == list(range(MAX_ANSWERING, MAX_ANSWERING + 500))
        assert {line["error"]["code"] for line in refused} == {OVER_LIMIT}
        assert f"at most {MAX_ANSWERING} of a server's requests" in refused[0]["error"]["message"]
        assert len(asked) == MAX_ANSWERING
        # A ping is answered however many wait.
        relays.take(request("p", "ping"), handler, nursery)
        assert stdin.lines[-1] == {"jsonrpc": "2.0", "id": "p", "result": {}}
        release.set()
    answered = [line for line in stdin.lines if "result" in line and line["id"] != "p"]
    assert len(answered) == MAX_ANSWERING
    # Room again once they are answered.
    async with trio.open_nursery() as nursery:
        relays.take(request("next", "elicitation/create"), handler, nursery)
    assert stdin.lines[-1] == {"jsonrpc": "2.0", "id": "next", "result": {"action": "decline"}}


async def test_a_method_named_in_a_warning_cut_inside_a_secret_shows_none_of_it_once_guarded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stdin = Stdin(limit=0)
    release = trio.Event()

    async def handler(req: rpc.Request) -> object:
        await release.wait()
        return {}

    relays = Relays("s", stdin, trio.Event(), stdin, lambda: "")
    method = padded(METHOD_SHOWN)
    with caplog.at_level(logging.WARNING):
        # Its answers wait in a stdin it does not read, and it asks past its bound.
        relays.take(request(0, method), None, None)
        relays.take(request(1, method), None, None)
        async with trio.open_nursery() as nursery:
            for i in range(MAX_ANSWERING + 1):
                relays.take(request(i, method), handler, nursery)
            release.set()
    said = [r.getMessage() for r in caplog.records]
    assert any("dropped the answer" in s for s in said)
    assert any("refused its" in s for s in said)
    for text in said:
        assert SECRET[:-1] in text and SECRET not in text
        assert beginnings(guarded(text)) == [] and MARKER in guarded(text)
