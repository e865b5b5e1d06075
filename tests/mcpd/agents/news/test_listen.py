"""``subscriptions/listen`` held directly on one agent connection over a socket pair:
acknowledged with what is honoured and tagged with the listen's id, tool-list changes
only for a listen that asked, a filter that is no object refused, a listen the agent
cancels forgotten at once, and every listen given its final response when the daemon
stops, without waiting out the stop's bound for listens already gone."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd.agents.agent import Agent, Audience
from mcpd.agents.agent_server import new_session
from mcpd.agents.answerer import Answerer
from mcpd.agents.connection.agent_connection import Connection
from mcpd.agents.connection.failures import Failures
from mcpd.agents.entry.unfinished import UnfinishedLines
from mcpd.agents.news.listen import Listens
from mcpd.config.tables.model import DaemonConfig
from mcpd.daemon import _LINES
from mcpd.servers.shared import AgentKey
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import RequestContext
from tests.support.clients.line_end import LineEnd
from tests.support.parts.routing import World

ACK = "notifications/subscriptions/acknowledged"


class Handler(Answerer):
    """Nothing the agent sends reaches it here: listens are held by the test."""

    def __init__(self, world: World) -> None:
        self.router = world.router
        self.failures = Failures()

    def answer_now(self, conn: Agent, req: rpc.Request) -> bytes:
        return rpc.encode_result(req.id, {})

    async def dispatch(self, conn: Agent, req: rpc.Request) -> bytes | None:
        return rpc.encode_result(req.id, {})

    def agent_joined(self, conn: Audience) -> None:
        pass

    def agent_gone(self, owner: AgentKey) -> None:
        pass


class Extras:
    """The prompts, resources and tasks part: what it was asked, what it ended."""

    def __init__(self) -> None:
        self.asked: list[tuple[rpc.Id, dict[str, Any]]] = []
        self.ended: list[rpc.Id] = []

    def extra(
        self, conn: Agent, rid: rpc.Id, wanted: dict[str, Any], ctx: RequestContext | None
    ) -> dict[str, Any]:
        self.asked.append((rid, wanted))
        return {"promptsListChanged": True} if wanted.get("promptsListChanged") else {}

    def end(self, conn: Agent, rid: rpc.Id) -> None:
        self.ended.append(rid)


class Link:
    def __init__(self, conn: Connection, agent: LineEnd, nursery: trio.Nursery) -> None:
        self.conn, self.agent, self.nursery = conn, agent, nursery
        self.extras = Extras()
        self.listens = Listens(self.extras.extra, self.extras.end)

    async def listen(self, rid: rpc.Id, params: Any) -> trio.CancelScope:
        """A listen held in a task of its own (the agent cancels it through the scope);
        returns once it is acknowledged."""
        scope = trio.CancelScope()
        req = rpc.Request(rid, "subscriptions/listen", Raw(json.dumps(params).encode()))

        async def hold() -> None:
            with scope:
                await self.listens.listen(self.conn, req)

        self.nursery.start_soon(hold)
        ack = await self.agent.line()
        assert ack["method"] == ACK
        return scope


@asynccontextmanager
async def connected() -> AsyncIterator[Link]:
    world = World()
    ours, theirs = trio.socket.socketpair()
    conn = Connection(
        Handler(world),
        trio.SocketStream(ours),
        new_session(),
        _LINES,
        DaemonConfig(),
        version=0,
        profile=world.profile,
        line_hold=UnfinishedLines(DaemonConfig).hold(None),
    )
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(conn.run)
                yield Link(conn, LineEnd(trio.SocketStream(theirs)), nursery)
                nursery.cancel_scope.cancel()
    finally:
        theirs.close()
        ours.close()


def tag(rid: rpc.Id) -> dict[str, Any]:
    return {mcp.KEY_SUBSCRIPTION_ID: rid}


async def test_a_listen_is_acknowledged_with_what_is_honoured_and_ended_with_a_response() -> None:
    async with connected() as link:
        req = rpc.Request(
            "l1",
            "subscriptions/listen",
            Raw(b'{"notifications":{"toolsListChanged":true,"promptsListChanged":true,"x":1}}'),
        )
        link.nursery.start_soon(link.listens.listen, link.conn, req)
        assert await link.agent.line() == {
            "jsonrpc": "2.0",
            "method": ACK,
            "params": {
                "_meta": tag("l1"),
                "notifications": {"toolsListChanged": True, "promptsListChanged": True},
            },
        }
        assert link.conn.subscriptions == {"l1"}
        assert link.extras.asked == [
            ("l1", {"toolsListChanged": True, "promptsListChanged": True, "x": 1})
        ]
        await link.listens.end_all()
        assert await link.agent.line() == {
            "jsonrpc": "2.0",
            "id": "l1",
            "result": {"resultType": mcp.COMPLETE, "_meta": tag("l1")},
        }
        assert link.conn.subscriptions == set() and link.extras.ended == ["l1"]


async def test_only_a_listen_that_asked_for_tool_list_changes_gets_them() -> None:
    async with connected() as link:
        await link.listen(1, {"notifications": {"toolsListChanged": False}})
        await link.listen(2, {})
        await link.listen(3, {"notifications": {"toolsListChanged": True}})
        assert link.conn.subscriptions == {3}
        await link.listens.end_all()


@pytest.mark.parametrize(
    "params",
    [
        b"[]",
        b"null",
        b'"all"',
        b'{"notifications":"all"}',
        b'{"notifications":["toolsListChanged"]}',
        b'{"notifications":true}',
    ],
)
async def test_a_filter_that_is_no_object_is_refused_and_holds_nothing(params: bytes) -> None:
    async with connected() as link:
        req = rpc.Request(7, "subscriptions/listen", Raw(params))
        with pytest.raises(rpc.RPCError) as info:
            await link.listens.listen(link.conn, req)
        assert (info.value.code, info.value.message) == (
            rpc.INVALID_PARAMS,
            "params.notifications must be an object",
        )
        assert link.conn.subscriptions == set() and link.extras.asked == []


async def test_a_listen_the_agent_cancels_is_forgotten_and_not_waited_for(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with connected() as link:
        scope = await link.listen("l1", {"notifications": {"toolsListChanged": True}})
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert link.conn.subscriptions == set() and link.extras.ended == ["l1"]
        before = trio.current_time()
        await link.listens.end_all()
        assert trio.current_time() == before


async def test_every_listen_is_ended_and_the_stop_waits_for_none_that_is_over(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with connected() as link:
        await link.listen("a", {"notifications": {"toolsListChanged": True}})
        await link.listen("b", {})
        before = trio.current_time()
        await link.listens.end_all()
        ends = {(await link.agent.line())["id"] for _ in range(2)}
        assert ends == {"a", "b"}
        assert trio.current_time() == before
        assert sorted(link.extras.ended) == ["a", "b"]


async def test_a_listen_begun_once_the_daemon_is_stopping_is_ended_at_once() -> None:
    async with connected() as link:
        await link.listens.end_all()
        await link.listen("late", {"notifications": {"toolsListChanged": True}})
        assert await link.agent.line() == {
            "jsonrpc": "2.0",
            "id": "late",
            "result": {"resultType": mcp.COMPLETE, "_meta": tag("late")},
        }
        await trio.testing.wait_all_tasks_blocked()
        assert link.conn.subscriptions == set() and link.extras.ended == ["late"]


class HeldConnection:
    """An agent's connection whose final responses wait until the test lets them go."""

    def __init__(self) -> None:
        self.subscriptions: set[rpc.Id] = set()
        self.go = trio.Event()

    async def send(self, line: bytes, rid: rpc.Id | None = None) -> None:
        if rid is not None:  # a listen's final response
            await self.go.wait()

    async def drain(self) -> None:
        pass


async def test_a_listen_begun_while_the_stop_waits_does_not_keep_it_waiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    listens = Listens()
    conn = HeldConnection()
    stopped_at: list[float] = []

    def req(rid: str) -> rpc.Request:
        return rpc.Request(rid, "subscriptions/listen", Raw(b"{}"))

    async def stop() -> None:
        await listens.end_all()
        stopped_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(listens.listen, conn, req("a"))  # type: ignore[arg-type]
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(stop)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(listens.listen, conn, req("b"))  # type: ignore[arg-type]
        await trio.testing.wait_all_tasks_blocked()
        began = trio.current_time()
        conn.go.set()
    assert stopped_at == [began]
