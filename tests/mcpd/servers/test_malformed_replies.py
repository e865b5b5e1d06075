"""A reply that answers a call but cannot be taken (an id like ``1.0``, both a result
and an error), from an old HTTP+SSE server on its event stream: the call fails at
once with words naming the server, not at its time limit; the server stays ready on
the same stream and answers the next call; the log says it once."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.agent import connect, make_config, running
from tests.support.legacy_sse_server import Message, Session, answer, serve_legacy_sse

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
