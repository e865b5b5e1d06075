"""What ``mcpd bridge`` asks a new daemon connection before relaying (``open_connection``),
against a daemon end played by the test on a socket pair: the answers it takes, what
it skips on the way, what it keeps for the host, and how a daemon that refuses, hangs
up or says nothing is told apart."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from mcpd.agents.bridge.opening import (
    LIMIT_ID,
    PROFILE_ID,
    Opened,
    OpeningRefused,
    open_connection,
)
from protocol.lines.framing import DEFAULT_MAX_LINE, LineFramer, Oversized

LIMIT = 30


def line(**members: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **members}).encode() + b"\n"


def limit_answer(size: int = 2048) -> bytes:
    return line(id=LIMIT_ID, result={"maxLineBytes": size})


class Daemon:
    """The daemon's end: what the bridge asked, and lines to answer with."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = b""

    async def asked(self, count: int) -> list[dict[str, Any]]:
        while self.buf.count(b"\n") < count:
            self.buf += await self.stream.receive_some()
        lines = self.buf.split(b"\n")
        self.buf = b"\n".join(lines[count:])
        return [json.loads(raw) for raw in lines[:count]]

    async def say(self, *lines: bytes) -> None:
        await self.stream.send_all(b"".join(lines))


@asynccontextmanager
async def pair() -> AsyncIterator[tuple[trio.SocketStream, Daemon]]:
    a, b = trio.socket.socketpair()
    bridge, daemon = trio.SocketStream(a), trio.SocketStream(b)
    async with bridge, daemon:
        yield bridge, Daemon(daemon)


async def opening(
    profile: str | None, *answers: bytes, max_line: int = DEFAULT_MAX_LINE
) -> tuple[Opened | OpeningRefused, list[dict[str, Any]]]:
    """What opening a connection comes to when the daemon answers ``answers`` once
    it has read the bridge's requests; and those requests."""
    with trio.fail_after(LIMIT):
        async with pair() as (bridge, daemon), trio.open_nursery() as nursery:
            asked: list[dict[str, Any]] = []

            async def answer() -> None:
                asked.extend(await daemon.asked(1 if profile is None else 2))
                await daemon.say(*answers)

            nursery.start_soon(answer)
            outcome = await open_connection(bridge, LineFramer(max_line), profile)
    return outcome, asked


async def test_the_line_limit_is_asked_in_the_modern_era_and_taken() -> None:
    outcome, asked = await opening(None, limit_answer(4096))
    assert outcome == Opened(4096, [])
    (ask,) = asked
    assert (ask["id"], ask["method"]) == (LIMIT_ID, "mcpd/lineLimit")
    meta = ask["params"]["_meta"]
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "mcpd-bridge"
    assert "io.modelcontextprotocol/protocolVersion" in meta


async def test_a_profile_is_asked_for_by_name_beside_the_limit() -> None:
    outcome, asked = await opening("work", limit_answer(), line(id=PROFILE_ID, result={}))
    assert outcome == Opened(2048, [])
    assert [(a["id"], a["method"]) for a in asked] == [
        (LIMIT_ID, "mcpd/lineLimit"),
        (PROFILE_ID, "mcpd/useProfile"),
    ]
    assert asked[1]["params"]["profile"] == "work"


async def test_the_answers_may_come_in_either_order() -> None:
    outcome, _ = await opening("work", line(id=PROFILE_ID, result={}), limit_answer(999))
    assert outcome == Opened(999, [])


async def test_a_profile_refused_says_the_daemons_reason() -> None:
    refusal = line(id=PROFILE_ID, error={"code": -32602, "message": "no profile 'work'"})
    outcome, _ = await opening("work", refusal, limit_answer())
    assert outcome == OpeningRefused("mcpd: no profile 'work'", True)


async def test_the_profile_refusal_counts_whichever_answer_came_first() -> None:
    refusal = line(id=PROFILE_ID, error={"code": -32602, "message": "not yours"})
    outcome, _ = await opening("work", limit_answer(), refusal)
    assert outcome == OpeningRefused("mcpd: not yours", True)


@pytest.mark.parametrize(
    "answer",
    [
        line(id=LIMIT_ID, error={"code": -32601, "message": "Method not found"}),
        line(id=LIMIT_ID, result={}),
        line(id=LIMIT_ID, result={"maxLineBytes": "big"}),
        line(id=LIMIT_ID, result=[1]),
    ],
    ids=["unknown-method", "no-size", "not-a-number", "not-an-object"],
)
async def test_a_daemon_that_gives_no_limit_is_held_to_the_bridges_own(answer: bytes) -> None:
    outcome, _ = await opening(None, answer)
    assert outcome == Opened(DEFAULT_MAX_LINE, [])


async def test_what_is_not_an_answer_to_the_bridge_is_skipped() -> None:
    outcome, _ = await opening(
        None,
        b"not json\n",
        line(method="notifications/message", params={}),
        line(id="other", result={"maxLineBytes": 1}),
        line(id=LIMIT_ID, method="mcpd/lineLimit"),
        b"x" * 300 + b"\n",
        limit_answer(512),
        max_line=200,
    )
    assert outcome == Opened(512, [])


async def test_what_the_daemon_sent_after_its_answers_is_kept_for_the_host() -> None:
    later = line(method="notifications/tools/list_changed")
    outcome, _ = await opening(None, limit_answer(), later, b"y" * 300 + b"\n", max_line=200)
    assert isinstance(outcome, Opened)
    first, second = outcome.early
    assert first == later.rstrip(b"\n")
    assert isinstance(second, Oversized)


@pytest.mark.parametrize(
    ("profile", "asked"), [(None, "for its line limit"), ("work", "for the profile")]
)
async def test_a_daemon_gone_before_it_is_asked_did_not_answer(
    profile: str | None, asked: str
) -> None:
    with trio.fail_after(LIMIT):
        async with pair() as (bridge, daemon):
            await daemon.stream.aclose()
            outcome = await open_connection(bridge, LineFramer(DEFAULT_MAX_LINE), profile)
    assert outcome == OpeningRefused(f"mcpd did not answer when asked {asked}", False)


async def test_a_daemon_that_hangs_up_after_reading_says_it_closed() -> None:
    with trio.fail_after(LIMIT):
        async with pair() as (bridge, daemon), trio.open_nursery() as nursery:

            async def read_then_leave() -> None:
                await daemon.asked(1)
                await daemon.stream.send_eof()

            nursery.start_soon(read_then_leave)
            outcome = await open_connection(bridge, LineFramer(DEFAULT_MAX_LINE), None)
    assert outcome == OpeningRefused(
        "mcpd closed the connection when asked for its line limit", False
    )


async def test_a_daemon_that_never_answers_is_given_up_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with pair() as (bridge, daemon):
        start = trio.current_time()
        outcome = await open_connection(bridge, LineFramer(DEFAULT_MAX_LINE), "work")
        waited = trio.current_time() - start
        assert len(await daemon.asked(2)) == 2
    assert outcome == OpeningRefused("mcpd did not answer when asked for the profile", False)
    assert waited == pytest.approx(10.0)


async def test_a_daemon_that_answers_only_one_of_two_is_given_up_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    outcome, _ = await opening("work", limit_answer())
    assert outcome == OpeningRefused("mcpd did not answer when asked for the profile", False)
