"""A legacy Streamable HTTP server that forgets mcpd's session, through a running
daemon: the server refuses what comes with no session or in one not yet initialized,
as sessionful servers do. Calls made at once across the loss all get their answers,
each run once, in one new session; a server that forgets the new session too costs
the call that met both losses, and the next call sets a session up again; a server
that forgets every session is not shown ready."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.daemons.supervision import text, wait_state
from tests.support.http_servers.serving import (
    MODERN_VERSION,
    LegacySession,
    Responder,
    SeenRequest,
    result,
    serve_http,
)

LIMIT = 60
CALLS = 10


class Forgetful:
    """A sessionful legacy server with one tool, ``echo``, which takes a little while
    (so that calls overlap) and counts what it ran."""

    def __init__(self) -> None:
        self.ran: Counter[int] = Counter()
        self.session = LegacySession(self.handle, strict=True)
        # The session id, header and _meta protocol versions each request came with
        # once it upgraded.
        self.modern_heads: list[tuple[str | None, str | None, str | None]] = []

    async def handle(self, req: SeenRequest, respond: Responder) -> None:
        method = req.rpc_method
        modern = self.session.modern
        if modern and req.method == "POST":
            meta = req.message.get("params", {}).get("_meta", {})
            said = meta.get("io.modelcontextprotocol/protocolVersion")
            head = (req.header("mcp-session-id"), req.header("mcp-protocol-version"), said)
            self.modern_heads.append(head)
        complete = {"resultType": "complete"} if modern else {}
        if req.method == "GET":
            await respond.reply(405)  # no push stream
        elif method == "server/discover":
            await respond.reply(400, "Bad Request")  # a legacy server's answer
        elif method == "tools/list":
            tools = [{"name": "echo", "inputSchema": {"type": "object"}}]
            await respond.json(result(req.rpc_id, {"tools": tools, **complete}))
        elif method == "tools/call":
            n = req.message["params"]["arguments"]["n"]
            self.ran[n] += 1
            await trio.sleep(0.2)
            said = {"content": [{"type": "text", "text": f"{n}"}], **complete}
            await respond.json(result(req.rpc_id, said))
        else:
            await respond.json(result(req.rpc_id, complete))


@asynccontextmanager
async def serving(
    tmp_path: Path, server: Forgetful, health_interval: float = 0
) -> AsyncIterator[Agent]:
    """An agent of a daemon whose server ``m``, the one ``server`` serves, is ready and
    has refused nothing since it connected."""
    async with serve_http(server.session) as web:
        cfg = make_config(tmp_path, {"m": {"url": web.url()}}, health_interval=health_interval)
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            await wait_state(agent, "m", "ready")
            server.session.refused.clear()  # the probe of its era, at connect
            yield agent


async def echo(agent: Agent, n: int) -> dict[str, Any]:
    return await agent.call("mcp__m__echo", {"n": n})


async def test_calls_made_at_once_across_a_lost_session_all_run_once(tmp_path: Path) -> None:
    server = Forgetful()
    answers: dict[int, dict[str, Any]] = {}
    with trio.fail_after(LIMIT):
        async with serving(tmp_path, server) as agent:
            server.session.forgets = 1  # as a server that restarted

            async def one(n: int) -> None:
                answers[n] = await echo(agent, n)

            async with trio.open_nursery() as nursery:
                for n in range(CALLS):
                    nursery.start_soon(one, n)
    for n, answer in answers.items():
        assert not answer.get("isError") and text(answer) == f"{n}", answer
    assert server.ran == Counter(range(CALLS))
    # One new session for them all, and nothing sent without it or before it was set up.
    assert len(server.session.sessions) == 2, server.session.sessions
    assert {status for status, _ in server.session.refused} == {404}


async def test_a_session_lost_twice_in_a_row_is_set_up_again(tmp_path: Path) -> None:
    server = Forgetful()
    with trio.fail_after(LIMIT):
        async with serving(tmp_path, server) as agent:
            # The call's session, then the one it is sent again in.
            server.session.forgets = 2
            lost = await echo(agent, 1)
            assert lost["isError"] and "session" in text(lost), lost
            assert server.ran[1] == 0
            for n in (2, 3):
                answer = await echo(agent, n)
                assert not answer.get("isError") and text(answer) == f"{n}", answer
            await wait_state(agent, "m", "ready")
    assert server.ran == Counter([2, 3])
    assert len(server.session.sessions) == 3, server.session.sessions
    assert {status for status, _ in server.session.refused} == {404}


async def test_a_server_restarted_on_2026_07_28_is_greeted_in_that_era(tmp_path: Path) -> None:
    """It refuses initialize naming 2026-07-28: the handshake that sets the lost
    session up again asks it server/discover, and the calls made at once across the
    loss, and those after, go in that era, with no session."""
    server = Forgetful()
    answers: dict[int, dict[str, Any]] = {}
    with trio.fail_after(LIMIT):
        async with serving(tmp_path, server) as agent:
            server.session.upgrades = True
            server.session.forgets = 1

            async def one(n: int) -> None:
                answers[n] = await echo(agent, n)

            async with trio.open_nursery() as nursery:
                for n in range(CALLS):
                    nursery.start_soon(one, n)
            await one(CALLS)
            row = await wait_state(agent, "m", "ready")
            assert row["era"] == "modern", row
    for n, answer in answers.items():
        assert not answer.get("isError") and text(answer) == f"{n}", answer
    assert server.ran == Counter(range(CALLS + 1))
    assert server.session.discovers == 1
    assert server.modern_heads, "nothing went after the server upgraded"
    assert set(server.modern_heads) == {(None, MODERN_VERSION, MODERN_VERSION)}, server.modern_heads


async def test_a_server_that_forgets_every_session_is_not_shown_ready(tmp_path: Path) -> None:
    """Its pings are refused for their session, however often it is set up again: an
    error that says so is no answer from a server that serves."""
    server = Forgetful()
    with trio.fail_after(LIMIT):
        async with serving(tmp_path, server, health_interval=0.2) as agent:
            server.session.forgets = 1_000_000
            row = await not_ready(agent, "m")
            assert "session" in str(row["last_error"]), row


async def not_ready(agent: Agent, alias: str) -> dict[str, Any]:
    while True:
        status = await agent.result("mcpd/status")
        for row in status["servers"]:
            if row["alias"] == alias and row["state"] != "ready":
                return row  # type: ignore[no-any-return]
        await trio.sleep(0.05)
