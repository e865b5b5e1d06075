"""The requests a stdio server sends mcpd: each answered in a task of its own on the
server's stdin, unless the server withdraws it or goes away first."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing
from msgspec import Raw

from protocol import jsonrpc as rpc
from transports.stdio.server_requests import Relays


class Stdin:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def __call__(self, line: bytes, what: str) -> None:
        self.lines.append(json.loads(line))


def request(rid: rpc.Id, method: str) -> rpc.Request:
    return rpc.Request(rid, method, None)


def withdrawal(rid: rpc.Id) -> rpc.Notification:
    params = Raw(rpc.encode({"requestId": rid, "reason": "no longer needed"}))
    return rpc.Notification("notifications/cancelled", params)


async def test_ping_and_requests_nobody_answers_are_answered_at_once() -> None:
    stdin = Stdin()
    relays = Relays("s", stdin, trio.Event())
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

    relays = Relays("s", stdin, trio.Event())
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

    relays = Relays("s", stdin, trio.Event())
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

    relays = Relays("s", stdin, closed)
    async with trio.open_nursery() as nursery:
        relays.take(request(1, "sampling/createMessage"), handler, nursery)
    assert stdin.lines == []
