"""What a transport sends on its own account (``transports.best_effort``), through a
POST the test plays: the cancellation and the answer go out as the server expects
them, and one that does not get through is logged under the transport's own logger,
never raised."""

from __future__ import annotations

import json
import logging

import pytest
import trio
import trio.testing

from protocol.jsonrpc import messages as rpc
from transports.best_effort import send_answer, send_cancel
from transports.errors import TransportClosed

log = logging.getLogger("mcpd.test-transport")


class Posts:
    """The POSTs a transport makes: kept, refused, or left hanging."""

    def __init__(self, *, refuse: bool = False, hang: bool = False) -> None:
        self.bodies: list[object] = []
        self.refuse = refuse
        self.hang = hang

    async def post(self, body: bytes) -> None:
        if self.hang:
            await trio.sleep_forever()
        if self.refuse:
            raise TransportClosed("a: connection refused")
        self.bodies.append(json.loads(body))


async def test_a_cancellation_names_the_request_given_up_on() -> None:
    posts = Posts()
    await send_cancel("a", log, 7, posts.post)
    assert posts.bodies == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "cancelled by the client"},
        }
    ]


async def test_a_cancellation_that_fails_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, log.name):
        await send_cancel("a", log, 7, Posts(refuse=True).post)
    [record] = caplog.records
    assert record.name == log.name
    assert record.getMessage() == (
        "a: notifications/cancelled for id 7 failed: a: connection refused"
    )


async def test_an_answer_that_gets_through_says_so() -> None:
    posts = Posts()
    req = rpc.Request(id=3, method="ping", params=None)
    assert await send_answer("a", log, None, req, posts.post, lambda: None)
    assert posts.bodies == [{"jsonrpc": "2.0", "id": 3, "result": {}}]


async def test_an_answer_refused_is_logged_with_the_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    req = rpc.Request(id=3, method="ping", params=None)
    with caplog.at_level(logging.INFO, log.name):
        assert not await send_answer("a", log, None, req, Posts(refuse=True).post, lambda: None)
    [record] = caplog.records
    assert record.getMessage() == (
        "a: could not answer the server's ping request: a: connection refused"
    )


async def test_an_answer_the_server_does_not_take_is_given_up(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    req = rpc.Request(id=3, method="ping", params=None)
    with caplog.at_level(logging.INFO, log.name):
        assert not await send_answer("a", log, None, req, Posts(hang=True).post, lambda: None)
    [record] = caplog.records
    assert record.getMessage() == "a: could not answer the server's ping request: no answer in time"
