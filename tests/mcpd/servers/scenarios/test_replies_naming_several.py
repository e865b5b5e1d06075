"""A server's reply that names two calls at once, a JSON-RPC batch of responses or a
response giving its ``"id"`` twice, from a Streamable HTTP server (in a call's JSON
reply or on its event stream) or an old HTTP+SSE server (on its stream): both calls
fail at once as the server's malformed reply, with words naming the server, not at
their time limit; the server stays ready, its breaker untouched, and answers the next
call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import Agent, make_config, two_agents
from tests.support.http_servers.legacy_sse import (
    Message,
    OnMessage,
    Session,
    answer,
    serve_legacy_sse,
    sse_event,
)
from tests.support.http_servers.serving import Responder, SeenRequest, serve_http

# Far longer than the test waits for the failed calls: it must not be what ends them.
CALL_TIMEOUT = 60.0
AT_ONCE = 10.0
# An id no call has: named last, so that no call takes a response that gives its id twice.
NOBODY = 99


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


def naming(form: str, ids: tuple[object, ...]) -> bytes:
    """One message naming ``ids``: a batch of their responses, or one response giving
    each as its id."""
    value = {"content": [{"type": "text", "text": "both"}]}
    if form == "batch":
        return json.dumps([{"jsonrpc": "2.0", "id": rid, "result": value} for rid in ids]).encode()
    given = "".join(f'"id":{json.dumps(rid)},' for rid in ids)
    return f'{{"jsonrpc":"2.0",{given}"result":{json.dumps(value)}}}'.encode()


def streamable(form: str, shape: str) -> tuple[Any, trio.Event]:
    """A modern Streamable HTTP server with one tool, "echo": its call with the text
    "hold" waits on an open event stream, and the one with "other" is answered with one
    message naming itself, the held call and no call (as its JSON reply, or the one event of its
    stream); the event is set once the held call came."""
    held: list[object] = []
    holding = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        msg = req.message
        rid, method = msg.get("id"), msg.get("method")
        if rid is None:
            return await respond.reply(202)
        said = ((msg.get("params") or {}).get("arguments") or {}).get("text")
        if said == "hold":
            held.append(rid)
            holding.set()
            await respond.sse_start()
            return await respond.wait_disconnect()
        if said == "other":
            data = naming(form, (rid, held[0], NOBODY))
            if shape == "json":
                return await respond.reply(200, data, {"Content-Type": "application/json"})
            return await respond.sse(b"event: message\ndata: " + data + b"\n\n")
        value: dict[str, Any] = {}
        if method == "server/discover":
            value = {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "ttlMs": 0,
                "cacheScope": "private",
            }
        elif method == "tools/list":
            value = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            value = {"content": [{"type": "text", "text": said}]}
        reply = {"jsonrpc": "2.0", "id": rid, "result": value | {"resultType": "complete"}}
        await respond.json(reply)

    return handler, holding


def old_server(form: str) -> tuple[OnMessage, trio.Event]:
    """``answer``'s old HTTP+SSE server, but its call with the text "hold" is held and
    the one with "other" answered, on the stream, with one message naming both and no
    call."""
    held: list[object] = []
    holding = trio.Event()

    async def on_message(session: Session, msg: Message) -> None:
        said = (msg.get("params") or {}).get("arguments", {}).get("text")
        if said == "hold":
            held.append(msg["id"])
            holding.set()
        elif said == "other":
            await session.send_raw(sse_event(naming(form, (msg["id"], held[0], NOBODY)).decode()))
        else:
            await answer(session, msg)

    return on_message, holding


async def both_fail_then_fine(agent: Agent, other: Agent, holding: trio.Event, alias: str) -> None:
    results: list[dict[str, Any]] = []

    async def call(client: Agent, said: str) -> None:
        results.append(await client.call(f"mcp__{alias}__echo", {"text": said}))

    with trio.fail_after(AT_ONCE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, agent, "hold")
            await holding.wait()
            nursery.start_soon(call, other, "other")
    assert len(results) == 2
    for result in results:
        assert result["isError"] is True, result
        words = text(result)
        assert f"The tool server '{alias}' sent a malformed reply to this call" in words
        assert f"'{alias}' is still running" in words
        assert result["_meta"]["mcpd/outage"]["state"] == "malformed", result
    fine = await agent.call(f"mcp__{alias}__echo", {"text": "fine"})
    assert text(fine) == "fine" and not fine.get("isError"), fine
    (row,) = (await agent.result("mcpd/status"))["servers"]
    assert row["state"] == "ready"
    assert row["breaker"]["consecutive_failures"] == 0


@pytest.mark.parametrize("form", ["batch", "twice"])
@pytest.mark.parametrize("shape", ["json", "sse"])
async def test_a_streamable_http_reply_naming_two_calls_fails_both_not_the_server(
    tmp_path: Path, form: str, shape: str
) -> None:
    handler, holding = streamable(form, shape)
    with trio.fail_after(30):
        async with serve_http(handler) as srv:
            server = {"url": srv.url(), "call_timeout": CALL_TIMEOUT}
            cfg = make_config(tmp_path, {"new": server}, startup_deadline=5.0)
            async with two_agents(cfg) as (_, agent, other):
                await both_fail_then_fine(agent, other, holding, "new")


@pytest.mark.parametrize("form", ["batch", "twice"])
async def test_an_sse_servers_message_naming_two_calls_fails_both_not_the_server(
    tmp_path: Path, form: str
) -> None:
    on_message, holding = old_server(form)
    with trio.fail_after(30):
        async with serve_legacy_sse(on_message) as srv:
            server = {"url": srv.url(), "transport": "sse", "call_timeout": CALL_TIMEOUT}
            cfg = make_config(tmp_path, {"old": server}, startup_deadline=5.0)
            async with two_agents(cfg) as (_, agent, other):
                await both_fail_then_fine(agent, other, holding, "old")
            assert len(srv.all_sessions) == 1
