"""A reply that answers a call but cannot be taken (an id like ``1.0``, both a result
and an error): from an old HTTP+SSE server on its event stream, the call fails at
once with words naming the server, not at its time limit; from a Streamable HTTP
server, as a malformed reply, not as the server's outage (one in another call's JSON
reply too fails both, neither as an outage; one in another call's event stream fails
only the call it answered; one for no call in a JSON reply fails that call). So does a
sound reply sent in response to another call: which call it answers is in doubt. Either
server stays ready and answers the next call; the log says it once."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import connect, make_config, running, two_agents
from tests.support.http_servers.legacy_sse import Message, Session, answer, serve_legacy_sse
from tests.support.http_servers.serving import Responder, SeenRequest, event, serve_http

# Far longer than the test waits for the failed call: it must not be what ends it.
CALL_TIMEOUT = 60.0


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")


def misanswering(how: str) -> Any:
    """The old server's answers, but its call with the text "bad" gets an unusable reply."""

    async def on_message(session: Session, msg: Message) -> None:
        params = msg.get("params") or {}
        if params.get("arguments", {}).get("text") != "bad":
            return await answer(session, msg)
        rid, value = msg["id"], {"content": [{"type": "text", "text": "bad"}]}
        if how == "float id":
            await session.send({"jsonrpc": "2.0", "id": float(rid), "result": value})
        else:
            error = {"code": -32000, "message": "no"}
            await session.send({"jsonrpc": "2.0", "id": rid, "result": value, "error": error})

    return on_message


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("float id", r"sent under the id \d+\.0 \(not an integer\) for request \d+"),
        ("both members", r"both a result and an error \(JSON-RPC allows one\)"),
    ],
)
async def test_an_sse_servers_unusable_reply_fails_its_call_at_once(
    tmp_path: Path, how: str, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(20), caplog.at_level(logging.WARNING, "mcpd"):
        async with serve_legacy_sse(misanswering(how)) as srv:
            cfg = make_config(
                tmp_path,
                {"old": {"url": srv.url(), "transport": "sse", "call_timeout": CALL_TIMEOUT}},
                startup_deadline=5.0,
            )
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                with trio.fail_after(5):
                    result = await agent.call("mcp__old__echo", {"text": "bad"})
                assert result["isError"] is True
                words = text(result)
                assert "The tool server 'old' sent a malformed reply to this call" in words
                assert "'old' is still running" in words
                assert result["_meta"]["mcpd/outage"]["state"] == "malformed"
                # Still ready, on the stream it had: the next call is answered.
                fine = await agent.call("mcp__old__echo", {"text": "fine"})
                assert text(fine) == "fine" and not fine.get("isError"), fine
                (row,) = (await agent.result("mcpd/status"))["servers"]
                assert row["state"] == "ready"
                assert len(srv.all_sessions) == 1
    logged = [r.getMessage() for r in caplog.records if "it answered failed" in r.getMessage()]
    assert len(logged) == 1, logged
    assert logged[0].startswith("old: the reply was ")
    assert re.search(why, logged[0]), logged[0]
    assert logged[0].endswith("the server keeps running")


async def streamable(req: SeenRequest, respond: Responder) -> None:
    """A modern Streamable HTTP server with one tool, "echo"; its call with the text
    "bad" is answered with both a result and an error."""
    msg = req.message
    rid, method = msg.get("id"), msg.get("method")
    if rid is None:
        return await respond.reply(202)
    if method == "server/discover":
        value: dict[str, Any] = {
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "ttlMs": 0,
            "cacheScope": "private",
        }
    elif method == "tools/list":
        value = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        said = msg["params"]["arguments"]["text"]
        value = {"content": [{"type": "text", "text": said}]}
        if said == "bad":
            error = {"code": -32000, "message": "no"}
            return await respond.json(
                {"jsonrpc": "2.0", "id": rid, "result": value, "error": error}
            )
    else:
        value = {}
    await respond.json({"jsonrpc": "2.0", "id": rid, "result": value | {"resultType": "complete"}})


async def test_a_streamable_http_servers_unusable_reply_fails_its_call_not_the_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(20), caplog.at_level(logging.WARNING, "mcpd"):
        async with serve_http(streamable) as srv:
            cfg = make_config(tmp_path, {"new": {"url": srv.url()}}, startup_deadline=5.0)
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                result = await agent.call("mcp__new__echo", {"text": "bad"})
                assert result["isError"] is True
                words = text(result)
                assert "The tool server 'new' sent a malformed reply to this call" in words
                assert "both a result and an error" in words
                assert result["_meta"]["mcpd/outage"]["state"] == "malformed"
                fine = await agent.call("mcp__new__echo", {"text": "fine"})
                assert text(fine) == "fine" and not fine.get("isError"), fine
                (row,) = (await agent.result("mcpd/status"))["servers"]
                assert row["state"] == "ready"
                assert row["breaker"]["consecutive_failures"] == 0
    logged = [r.getMessage() for r in caplog.records if "it answered failed" in r.getMessage()]
    [line] = logged
    assert re.fullmatch(
        r"new: the reply was both a result and an error \(JSON-RPC allows one\) and was "
        r"dropped; the request \(id \d+\) it answered failed, the server keeps running",
        line,
    ), line


def answering_another(how: str, shape: str) -> tuple[Any, trio.Event]:
    """``streamable``, but its call with the text "hold" waits on an open event stream,
    and the one with "other" is answered with a reply for the held call (``how``:
    "sound" or with both members), in its JSON body or (``shape`` "sse") on its event
    stream before its own; the event is set once the held call came."""
    held: list[Any] = []
    holding = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        said = ((req.message.get("params") or {}).get("arguments") or {}).get("text")
        if said == "hold":
            held.append(req.message["id"])
            holding.set()
            await respond.sse_start()
            return await respond.wait_disconnect()
        if said == "other":
            value = {"content": [{"type": "text", "text": "other"}]}
            stray: dict[str, Any] = {"jsonrpc": "2.0", "id": held[0], "result": value}
            if how == "both members":
                stray["error"] = {"code": -32000, "message": "no"}
            if shape == "json":
                return await respond.json(stray)
            own = {"jsonrpc": "2.0", "id": req.message["id"], "result": value}
            return await respond.sse(event(stray), event(own))
        await streamable(req, respond)

    return handler, holding


WHY_HELD = {"both members": "both a result and an error", "sound": "sent in response to"}
WHY_AGAIN = {**WHY_HELD, "sound": "a response for no request in flight"}


@pytest.mark.parametrize("how", ["both members", "sound"])
@pytest.mark.parametrize("shape", ["json", "sse"])
async def test_a_reply_for_another_call_fails_the_call_it_answered_not_the_server(
    tmp_path: Path, how: str, shape: str
) -> None:
    handler, holding = answering_another(how, shape)
    with trio.fail_after(20):
        async with serve_http(handler) as srv:
            server = {"url": srv.url(), "call_timeout": CALL_TIMEOUT}
            cfg = make_config(tmp_path, {"new": server}, startup_deadline=5.0)
            async with two_agents(cfg) as (_, agent, other):
                results: list[dict[str, Any]] = []

                async def hold() -> None:
                    results.append(await agent.call("mcp__new__echo", {"text": "hold"}))

                # The held call's answer came where it does not belong: it fails now,
                # not at its limit.
                with trio.fail_after(5):
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(hold)
                        await holding.wait()
                        answered = await other.call("mcp__new__echo", {"text": "other"})
                assert results[0]["isError"] is True
                assert results[0]["_meta"]["mcpd/outage"]["state"] == "malformed", results[0]
                assert WHY_HELD[how] in text(results[0])
                # Again, once the held call is over: its reply is then for no call.
                again = await other.call("mcp__new__echo", {"text": "other"})
                if shape == "json":
                    # Its reply held nothing else: it fails too, as a malformed reply.
                    for result in (answered, again):
                        assert result["isError"] is True
                        assert result["_meta"]["mcpd/outage"]["state"] == "malformed", result
                    assert "the answer to another request in flight" in text(answered)
                    assert WHY_AGAIN[how] in text(again)
                else:
                    for result in (answered, again):
                        assert text(result) == "other" and not result.get("isError"), result
                (row,) = (await agent.result("mcpd/status"))["servers"]
                assert row["state"] == "ready"
                assert row["breaker"]["consecutive_failures"] == 0
                fine = await agent.call("mcp__new__echo", {"text": "fine"})
                assert text(fine) == "fine" and not fine.get("isError"), fine
