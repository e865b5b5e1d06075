"""A legacy server's -32042 (URL elicitation required), through a running daemon, as
each agent can take it: a legacy agent that declared URL elicitation gets it as the
server sent it; a 2026-07-28 agent that declared it gets the same ask as an
``input_required``, whose retry is the call again; any other agent gets mcpd's own
error result, naming the server and what it wants, without the link."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec import Raw

from mcpd.agents.agent import NO_ONE
from mcpd.agents.askback import url_required
from mcpd.daemon import Daemon
from mcpd.servers.calling.calls import Call
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import RequestContext
from tests.support.clients.agent import META, connect, make_config, running
from tests.support.parts.routing import agent_call
from tests.support.system.procs import scripted

LIMIT = 30
URL = "https://example.com/auth?session=42"
LINK = {"mode": "url", "elicitationId": "e-1", "url": URL, "message": "Sign in to go on."}
ERROR = {"code": -32042, "message": "URL elicitation required", "data": {"elicitations": [LINK]}}
PARAMS = {"name": "mcp__s__rpc_error", "arguments": ERROR}


@asynccontextmanager
async def legacy_server(tmp_path: Path) -> AsyncIterator[Daemon]:
    log = str(tmp_path / "server.in")
    command, args = scripted("--era", "legacy", "--names", "rpc_error", "--log-file", log)
    config = make_config(tmp_path, {"s": {"command": command, "args": list(args)}})
    async with running(config) as daemon:
        yield daemon


def calls_reached(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "server.in").read_text().splitlines()
    sent = [json.loads(x) for x in lines if x.strip()]
    return [m["params"] for m in sent if m.get("method") == "tools/call"]


async def legacy_call(daemon: Daemon, capabilities: dict[str, Any]) -> dict[str, Any]:
    async with connect(daemon.socket_path, modern=False) as agent:
        await agent.rpc(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "t", "version": "0"},
            },
        )
        return await agent.rpc("tools/call", PARAMS)


def modern(capabilities: dict[str, Any]) -> dict[str, Any]:
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": capabilities}
    return {**PARAMS, "_meta": meta}


async def test_a_legacy_agent_that_takes_url_asks_gets_the_servers_error(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with legacy_server(tmp_path) as daemon:
            reply = await legacy_call(daemon, {"elicitation": {"url": {}}})
    assert reply["error"]["code"] == -32042
    assert reply["error"]["data"]["elicitations"][0]["url"] == URL


@pytest.mark.parametrize(
    ("era", "capabilities"),
    [("legacy", {"elicitation": {}}), ("legacy", {}), ("2026-07-28", {"elicitation": {}})],
)
async def test_an_agent_that_cannot_show_a_link_is_told_what_the_server_wants_without_it(
    tmp_path: Path, era: str, capabilities: dict[str, Any]
) -> None:
    with trio.fail_after(LIMIT):
        async with legacy_server(tmp_path) as daemon:
            if era == "legacy":
                reply = await legacy_call(daemon, capabilities)
            else:
                async with connect(daemon.socket_path) as agent:
                    reply = await agent.rpc("tools/call", modern(capabilities))
    result = reply["result"]
    assert result["isError"] is True
    [block] = result["content"]
    assert block["text"].startswith("The server 's' needs the user to open a link")
    assert "example.com" not in json.dumps(reply)
    assert ("resultType" in result) is (era != "legacy")


async def test_a_modern_agent_that_takes_url_asks_gets_them_as_input_required(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with legacy_server(tmp_path) as daemon, connect(daemon.socket_path) as agent:
            params = modern({"elicitation": {"url": {}}})
            first = (await agent.rpc("tools/call", params))["result"]
            assert first["resultType"] == "input_required"
            [(key, request)] = first["inputRequests"].items()
            assert request["method"] == "elicitation/create"
            asked = request["params"]
            assert (asked["mode"], asked["url"], asked["elicitationId"]) == ("url", URL, "e-1")
            assert asked["message"].startswith("[mcpd] The server 's' asks:")
            assert first["requestState"].startswith("mcpd-round:")
            retry = {
                **params,
                "inputResponses": {key: {"action": "accept"}},
                "requestState": first["requestState"],
            }
            again = (await agent.rpc("tools/call", retry))["result"]
            assert again["resultType"] == "input_required"  # it still wants the link opened
    first_sent, retried = calls_reached(tmp_path)
    assert retried == first_sent  # the call again, with nothing of a round in it


def test_an_ask_whose_links_cannot_be_read_is_said_so_and_other_errors_pass() -> None:
    caps = {"elicitation": {"url": {}}}
    ctx = RequestContext("modern", "2026-07-28", {}, caps)
    call = agent_call(Call(1, "t", Raw(b"{}"), NO_ONE, ctx, alias="s"), modern=True)
    unread = url_required.for_call(call, rpc.RPCError(-32042, "x", Raw(b'{"elicitations":1}')))
    assert isinstance(unread, mcp.CallToolResult) and unread.isError
    [block] = unread.content
    assert isinstance(block, mcp.TextContent) and "named no link mcpd could read" in block.text
    other = rpc.RPCError(-32602, "[s] bad")
    assert url_required.for_call(call, other) is other


# A sign-in link as long as real ones run, its end the part a cut would lose.
LONG_URL = (
    "https://login.example.com/authorize?"
    + "&".join(f"p{i}={'x' * 30}" for i in range(40))
    + "&state=END_OF_URL"
)
# The same link named again and again, then more distinct links than a person opens.
FLOOD = [{"mode": "url", "elicitationId": "e-0", "url": LONG_URL, "message": "Sign in."}] * 50
FLOOD += [
    {"mode": "url", "elicitationId": f"e-{i}", "url": f"https://example.com/{i}", "message": "m"}
    for i in range(1, 30)
]
FLOOD_PARAMS = {
    "name": "mcp__s__rpc_error",
    "arguments": {**ERROR, "data": {"elicitations": FLOOD}},
}


async def test_the_journal_has_each_link_whole_once_and_says_how_many_were_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="mcpd.askback")
    with trio.fail_after(LIMIT):
        async with (
            legacy_server(tmp_path) as daemon,
            connect(daemon.socket_path, modern=False) as agent,
        ):
            await agent.initialize()
            reply = await agent.rpc("tools/call", FLOOD_PARAMS)
    assert reply["result"]["isError"] is True
    said = [r.getMessage() for r in caplog.records if r.name == "mcpd.askback"]
    asks = [m for m in said if "asks the user of an agent to open" in m]
    assert len(asks) == url_required.MAX_LINKS
    assert f'"{LONG_URL}"' in asks[0]  # whole, so the person can open it
    distinct = 1 + 29
    assert any(f"named {distinct - url_required.MAX_LINKS} more links" in m for m in said)


async def test_a_modern_agent_is_asked_each_link_once_and_only_a_few(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with legacy_server(tmp_path) as daemon, connect(daemon.socket_path) as agent:
            params = {**FLOOD_PARAMS, "_meta": modern({"elicitation": {"url": {}}})["_meta"]}
            first = (await agent.rpc("tools/call", params))["result"]
    assert first["resultType"] == "input_required"
    urls = [r["params"]["url"] for r in first["inputRequests"].values()]
    assert len(urls) == url_required.MAX_LINKS
    assert urls[0] == LONG_URL and len(set(urls)) == len(urls)
