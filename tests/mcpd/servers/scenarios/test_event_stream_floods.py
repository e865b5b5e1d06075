"""A server that keeps an event of its event stream open with ``data`` lines that never
end it (on a legacy session's push stream, or on the HTTP+SSE transport's one stream),
or that asks without end on its push stream while no call is in flight, is read more
slowly than it sends: `mcpd status` names it as held back, what it asks is answered
only as fast as its budget lets, and a call to another server goes through meanwhile."""

from __future__ import annotations

import itertools
import logging
import sys
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.daemons.fault_harness import HOSTILE_STDIO
from tests.support.http_servers.legacy_sse import Message, Session, answer, serve_legacy_sse
from tests.support.http_servers.serving import (
    LegacySession,
    Responder,
    SeenRequest,
    event,
    serve_http,
)
from transports.read_pace import ANSWER_COST

LIMIT = 30
BUDGET = 100  # the flooding server's units a second
# Lines of an event that never ends: each a ``data`` field with nothing in it.
DATA_LINES = b"data\r" * 4096
CALM = {"command": sys.executable, "args": [HOSTILE_STDIO]}
HELD = "it sends more than mcpd reads of what answers no request"


class HeldBack(logging.Handler):
    """Sets ``said`` once the journal says a server is being held back."""

    def __init__(self) -> None:
        super().__init__()
        self.said = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "mcpd_event", None) == "held_back":
            self.said.set()


def legacy(on_get: Any) -> LegacySession:
    """A legacy server whose push stream (GET) is ``on_get``'s."""

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method == "server/discover":
            await respond.reply(400, "Bad Request")  # a legacy server's answer to the probe
        elif req.method == "GET":
            await on_get(respond)
        else:
            await respond.reply(405)

    return LegacySession(handler, tools=[{"name": "t", "inputSchema": {"type": "object"}}])


async def check_held_back(agent: Agent, alias: str) -> None:
    status = await agent.result("mcpd/status")
    rows = {row["alias"]: row for row in status["servers"]}
    assert HELD in rows[alias]["held_back"]["reason"]
    assert rows["calm"]["held_back"] is None
    done = await agent.call("mcp__calm__echo", {"text": "hi"})
    assert done["content"] == [{"type": "text", "text": "echo:hi"}]


async def test_a_push_stream_of_data_lines_that_never_end_an_event_is_held_back(
    tmp_path: Path,
) -> None:
    async def flood(respond: Responder) -> None:
        await respond.sse_start()
        while True:
            await respond.send(DATA_LINES)

    journal = HeldBack()
    logger = logging.getLogger("mcpd")
    logger.addHandler(journal)
    try:
        with trio.fail_after(LIMIT):
            async with serve_http(legacy(flood)) as server:
                servers = {"flood": {"url": server.url(), "read_budget": BUDGET}, "calm": CALM}
                async with (
                    running(make_config(tmp_path, servers)) as daemon,
                    connect(daemon.socket_path) as agent,
                ):
                    await journal.said.wait()
                    await check_held_back(agent, "flood")
    finally:
        logger.removeHandler(journal)


async def test_an_http_sse_stream_of_data_lines_that_never_end_an_event_is_held_back(
    tmp_path: Path,
) -> None:
    async def flooding(session: Session, msg: Message) -> None:
        await answer(session, msg)
        if msg.get("method") == "tools/list":
            while True:
                await session.send_raw(DATA_LINES)

    journal = HeldBack()
    logger = logging.getLogger("mcpd")
    logger.addHandler(journal)
    try:
        with trio.fail_after(LIMIT):
            async with serve_legacy_sse(flooding) as server:
                servers = {"flood": {"url": server.url(), "read_budget": BUDGET}, "calm": CALM}
                async with (
                    running(make_config(tmp_path, servers)) as daemon,
                    connect(daemon.socket_path) as agent,
                ):
                    await journal.said.wait()
                    await check_held_back(agent, "flood")
    finally:
        logger.removeHandler(journal)


async def test_requests_on_a_push_stream_are_answered_only_as_fast_as_the_budget_lets(
    tmp_path: Path,
) -> None:
    # Each request waits for its answer (a refusal: no agent has a call in flight) before
    # the next: every one is read, and posted back, on its own.
    session: LegacySession

    async def ask(respond: Responder) -> None:
        await respond.sse_start()
        for n in itertools.count():
            await respond.send(event({"jsonrpc": "2.0", "id": n, "method": "roots/list"}))
            while len(session.answers) <= n:
                await session.answered.wait()

    session = legacy(ask)
    journal = HeldBack()
    logger = logging.getLogger("mcpd")
    logger.addHandler(journal)
    try:
        with trio.fail_after(LIMIT):
            async with serve_http(session) as server:
                servers = {"asks": {"url": server.url(), "read_budget": BUDGET}, "calm": CALM}
                async with (
                    running(make_config(tmp_path, servers)) as daemon,
                    connect(daemon.socket_path) as agent,
                ):
                    await journal.said.wait()
                    start, before = trio.current_time(), len(session.answers)
                    await trio.sleep(2.0)
                    spent = trio.current_time() - start
                    answered = len(session.answers) - before
                    # What the budget gave in the window, and a read already under way.
                    assert answered <= BUDGET * spent / ANSWER_COST + 2
                    assert all("error" in a for a in session.answers)
                    await check_held_back(agent, "asks")
    finally:
        logger.removeHandler(journal)
