"""One agent connection (``mcpd.agents.connection.agent_connection.Connection``) over a
real socket pair, driven from the agent's end: a stand-in for the answerer behind it
(``Handler``), a router over stand-in servers (``tests.support.parts.routing.World``),
and messages to send."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from msgspec import Raw

from mcpd.agents.agent import Agent, Audience
from mcpd.agents.agent_server import new_session
from mcpd.agents.answerer import Answerer
from mcpd.agents.connection.agent_connection import Connection
from mcpd.agents.connection.failures import Failures
from mcpd.agents.entry.unfinished import UnfinishedLines
from mcpd.config.tables.model import DaemonConfig
from mcpd.daemon import _LINES
from mcpd.servers.shared import AgentKey
from protocol.jsonrpc import messages as rpc
from tests.support.clients.agent import META
from tests.support.clients.line_end import LineEnd
from tests.support.parts.routing import World

RESULT = Raw(b'{"content":[{"type":"text","text":"done"}]}')


def request(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def call(rid: Any, name: str, meta: Any = META) -> dict[str, Any]:
    return request(rid, "tools/call", {"name": name, "arguments": {}, "_meta": meta})


def cancel(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}


class Handler(Answerer):
    """The answerer as far as a connection needs it: lifecycle requests answered with
    their method's name; ``test/wait`` answered never (its end is noted), ``test/ask``
    with what the agent answers the server's request it relays, anything else at once."""

    def __init__(self, world: World) -> None:
        self.router = world.router
        self.failures = Failures()
        self.answered_now: list[str] = []
        self.waiting: dict[Any, trio.Event] = {}
        self.ended: dict[Any, trio.Event] = {}

    def answer_now(self, conn: Agent, req: rpc.Request) -> bytes:
        self.answered_now.append(req.method)
        return rpc.encode_result(req.id, {"lifecycle": req.method})

    async def dispatch(self, conn: Agent, req: rpc.Request) -> bytes | None:
        if req.method == "test/wait":
            self.ended[req.id] = trio.Event()
            self.waiting.setdefault(req.id, trio.Event()).set()
            try:
                await trio.sleep_forever()
            finally:
                self.ended[req.id].set()
        if req.method == "test/ask":
            try:
                said = await conn.asks.request("roots/list", {"for": req.id}, conn.offer)
            except rpc.RPCError as exc:
                return rpc.encode_error(req.id, exc.code, exc.message)
            return rpc.encode_result(req.id, {"agent said": json.loads(bytes(said))})
        return rpc.encode_result(req.id, {"dispatched": req.method})

    async def started(self, rid: Any) -> None:
        await self.waiting.setdefault(rid, trio.Event()).wait()

    def agent_joined(self, conn: Audience) -> None:
        pass

    def agent_gone(self, owner: AgentKey) -> None:
        pass


class AgentEnd(LineEnd):
    async def ended(self) -> bytes:
        """What mcpd still wrote until it closed the connection."""
        rest = self._buf
        while data := await self.stream.receive_some(1 << 16):
            rest += data
        return rest

    async def pinged(self, rid: Any = "p") -> None:
        """A ping answered, and nothing written before its answer."""
        await self.send(request(rid, "ping"))
        assert await self.line() == {"jsonrpc": "2.0", "id": rid, "result": {"lifecycle": "ping"}}


class Link:
    def __init__(self, world: World, handler: Handler, conn: Connection, agent: AgentEnd) -> None:
        self.world, self.handler, self.conn, self.agent = world, handler, conn, agent
        self.done = trio.Event()
        self.gone = 0
        conn.gone_hooks.append(self._gone)

    def _gone(self) -> None:
        self.gone += 1

    async def run(self) -> None:
        try:
            await self.conn.run()
        finally:
            self.done.set()


@asynccontextmanager
async def connected(world: World | None = None, **limits: Any) -> AsyncIterator[Link]:
    world = world or World()
    handler = Handler(world)
    ours, theirs = trio.socket.socketpair()
    stream = trio.SocketStream(ours)
    conn = Connection(
        handler,
        stream,
        new_session(),
        _LINES,
        DaemonConfig(**limits),
        version=0,
        profile=world.profile,
        line_hold=UnfinishedLines(lambda: DaemonConfig(**limits)).hold(None),
    )
    link = Link(world, handler, conn, AgentEnd(trio.SocketStream(theirs)))
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(link.run)
                yield link
                theirs.close()
                await link.done.wait()
    finally:
        theirs.close()
        ours.close()


def error_of(reply: dict[str, Any]) -> tuple[Any, int, str]:
    return reply["id"], reply["error"]["code"], reply["error"]["message"]
