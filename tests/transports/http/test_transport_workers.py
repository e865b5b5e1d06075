"""Calls sent without waiting (``Transport.send``) over Streamable HTTP: they wait in the
transport's workers, as many as its pooled connections, not in a task each; one given
up is dropped where it is (queued or under way) and the others still go; a legacy
server's request on a call's stream is answered in the context of that call's sender."""

from __future__ import annotations

import contextvars
import json
from typing import Any

import msgspec
import trio
import trio.lowlevel

from protocol.jsonrpc import messages as rpc
from tests.support.http_servers.serving import (
    Responder,
    SeenRequest,
    event,
    result,
    serve_http,
    server_request,
)
from transports.http.params import HttpParams
from transports.http.transport import open_http_transport

LIMIT = 10
SENDER: contextvars.ContextVar[str] = contextvars.ContextVar("sender", default="none")


class Replies:
    """What each call's reply got, by the call's name."""

    def __init__(self) -> None:
        self.got: dict[str, Any] = {}
        self.changed = trio.Event()

    def to(self, name: str) -> Any:
        def reply(raw: msgspec.Raw | None, error: Exception | None) -> None:
            self.got[name] = json.loads(bytes(raw)) if raw is not None else error
            self.changed.set()
            self.changed = trio.Event()

        return reply

    async def wait(self, count: int) -> None:
        while len(self.got) < count:
            await self.changed.wait()


class Spawns(trio.abc.Instrument):
    """Tasks the transport starts (the test server's own are left out)."""

    def __init__(self) -> None:
        self.tasks = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        if task.name.startswith("transports."):
            self.tasks += 1


async def echo(req: SeenRequest, respond: Responder) -> None:
    await respond.json(result(req.rpc_id, req.message["params"]))


async def test_calls_wait_in_as_many_workers_as_connections_not_a_task_each() -> None:
    replies = Replies()
    spawns = Spawns()
    with trio.fail_after(LIMIT):
        async with (
            serve_http(echo) as srv,
            open_http_transport("a", srv.url(), HttpParams(pool_size=4)) as t,
        ):
            trio.lowlevel.add_instrument(spawns)
            try:
                for batch in range(10):
                    for i in range(8):
                        name = f"{batch}-{i}"
                        t.send("tools/call", {"name": name}, replies.to(name))
                    await replies.wait(8 * (batch + 1))
            finally:
                trio.lowlevel.remove_instrument(spawns)
    assert replies.got == {f"{b}-{i}": {"name": f"{b}-{i}"} for b in range(10) for i in range(8)}
    # 80 calls, 8 at a time, over 4 connections: 4 workers served them all.
    assert spawns.tasks <= 4
    assert srv.connections <= 4


async def test_a_call_given_up_under_way_is_dropped_and_the_ones_behind_it_still_go() -> None:
    held = trio.Event()
    gone = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.message["params"]["name"] == "slow":
            held.set()
            await respond.wait_disconnect()
            gone.set()
        else:
            await echo(req, respond)

    replies = Replies()
    with trio.fail_after(LIMIT):
        async with (
            serve_http(handler) as srv,
            open_http_transport("a", srv.url(), HttpParams(pool_size=1)) as t,
        ):
            slow = t.send("tools/call", {"name": "slow"}, replies.to("slow"))
            t.send("tools/call", {"name": "next"}, replies.to("next"))
            await held.wait()
            t.forget(slow, "cancelled by the client")
            await gone.wait()  # the server sees its exchange dropped
            await replies.wait(1)
            t.send("tools/call", {"name": "after"}, replies.to("after"))
            await replies.wait(2)
    assert replies.got == {"next": {"name": "next"}, "after": {"name": "after"}}


async def test_a_call_given_up_while_queued_never_reaches_the_server() -> None:
    release = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.message["params"]["name"] == "first":
            await release.wait()
        await echo(req, respond)

    replies = Replies()
    with trio.fail_after(LIMIT):
        async with (
            serve_http(handler) as srv,
            open_http_transport("a", srv.url(), HttpParams(pool_size=1)) as t,
        ):
            t.send("tools/call", {"name": "first"}, replies.to("first"))
            queued = t.send("tools/call", {"name": "queued"}, replies.to("queued"))
            t.forget(queued, "cancelled by the client")
            release.set()
            await replies.wait(1)
            t.send("tools/call", {"name": "last"}, replies.to("last"))
            await replies.wait(2)
    assert set(replies.got) == {"first", "last"}
    names = [r.message["params"]["name"] for r in srv.requests]
    assert names == ["first", "last"]


async def test_a_legacy_servers_request_on_a_calls_stream_is_asked_as_its_sender() -> None:
    answered: dict[Any, trio.Event] = {}

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.rpc_method is None:  # our answer to the server's request
            await respond.reply(202)
            answered[req.rpc_id].set()
            return
        name = req.message["params"]["name"]
        asked = f"ask-{name}"
        answered[asked] = trio.Event()
        await respond.sse_start()
        await respond.send(event(server_request(asked, "roots/list")))
        await answered[asked].wait()
        await respond.send(event(result(req.rpc_id, {"name": name})))
        await respond.end()

    asked_as: dict[Any, str] = {}

    async def on_request(req: rpc.Request) -> object:
        asked_as[req.id] = SENDER.get()
        return {"roots": []}

    replies = Replies()
    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv, open_http_transport("old", srv.url()) as t:
            t.era = "legacy"
            t.on_request = on_request
            for name in ("one", "two"):
                token = SENDER.set(f"agent {name}")
                try:
                    t.send("tools/call", {"name": name}, replies.to(name))
                finally:
                    SENDER.reset(token)
            await replies.wait(2)
    assert replies.got == {"one": {"name": "one"}, "two": {"name": "two"}}
    assert asked_as == {"ask-one": "agent one", "ask-two": "agent two"}
