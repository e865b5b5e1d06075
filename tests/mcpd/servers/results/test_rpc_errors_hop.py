"""A server's errors about mcpd's request to it, not what the agent asked (-32022 the
version it was made for, -32020 its HTTP headers, -32021 the capabilities declared
with it), through a running daemon: each reaches the agent as mcpd's own error naming
the server (over HTTP with 200, as mcpd's other internal errors, not the 400 of an
agent's own mistake), and a server that no longer speaks the session's version is
greeted again, in the era it speaks now, so that calls work again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.daemon import Daemon
from tests.support.clients.agent import META, connect, make_config, running
from tests.support.clients.daemon_http import CURL, modern_headers, post
from tests.support.daemons.pins import FIRST, Changing, config
from tests.support.system.procs import scripted

LIMIT = 30
TOOL = "mcp__s__rpc_error"
VERSION = {"supported": ["2025-11-25"], "requested": "2026-07-28"}
CAPABILITY = {"requiredCapabilities": {"elicitation": {}}}
# (the server's error, what mcpd's says went wrong, the data the agent gets)
HOPS = [
    ((-32022, "Unsupported protocol version", VERSION), "does not speak the protocol", None),
    ((-32020, "Header mismatch: Mcp-Name", None), "HTTP headers of mcpd's request", None),
    ((-32021, "Missing capability", CAPABILITY), "needs a client capability", CAPABILITY),
]


@asynccontextmanager
async def modern_server(tmp_path: Path) -> AsyncIterator[Daemon]:
    command, args = scripted("--era", "modern", "--names", "rpc_error")
    config = make_config(tmp_path, {"s": {"command": command, "args": list(args)}})
    async with running(config) as daemon:
        yield daemon


def arguments(error: tuple[int, str, Any]) -> dict[str, Any]:
    code, message, data = error
    return {"code": code, "message": message, "data": data}


def assert_mcpds(error: dict[str, Any], said: str, data: Any, alias: str = "s") -> None:
    assert error["code"] == -32603, error
    message = error["message"]
    assert message.startswith(f"mcpd's request to the server {alias!r} failed: "), message
    assert said in message and "not something wrong with this request" in message
    assert error.get("data", "absent") == ("absent" if data is None else data)


@pytest.mark.parametrize(("error", "said", "data"), HOPS, ids=["32022", "32020", "32021"])
async def test_a_servers_error_about_mcpds_request_is_mcpds_own_to_agents(
    tmp_path: Path, error: tuple[int, str, Any], said: str, data: Any
) -> None:
    params = {"name": TOOL, "arguments": arguments(error)}
    with trio.fail_after(LIMIT):
        async with modern_server(tmp_path) as daemon:
            for modern in (True, False):
                async with connect(daemon.socket_path, modern) as agent:
                    if not modern:
                        await agent.initialize()
                    reply = await agent.rpc("tools/call", params)
                assert "error" in reply, reply
                assert_mcpds(reply["error"], said, data)
            if CURL is not None:
                body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
                body["params"] = {**params, "_meta": META}
                got = await post(daemon.socket_path, body, *modern_headers("tools/call", TOOL))
                assert got.status == 200
                assert_mcpds(got.json()["error"], said, data)


async def test_a_server_that_no_longer_speaks_the_sessions_version_is_greeted_again(
    tmp_path: Path,
) -> None:
    """Deployed anew as a legacy server, it refuses a call made for 2026-07-28: mcpd
    asks it which versions it speaks, and greets it again in the era it speaks now."""
    server = Changing(tmp_path, era="both")
    cfg = config(tmp_path, {"tickets": server.config()})
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            done = {"content": [{"type": "text", "text": "called search"}]}
            assert (await agent.call("mcp__tickets__search")).items() >= done.items()
            server.write({**FIRST, "era": "legacy"})
            reply = await agent.rpc("tools/call", {"name": "mcp__tickets__search"})
            assert_mcpds(reply["error"], "does not speak the protocol", None, "tickets")
            while True:  # until the server is greeted again: the call gets its result
                reply = await agent.rpc("tools/call", {"name": "mcp__tickets__search"})
                if reply.get("result", {}).get("content") == done["content"]:
                    break
                await trio.sleep(0.05)
    refused = [line for line in server.reached() if line == "tools/call search"]
    assert len(refused) >= 3
