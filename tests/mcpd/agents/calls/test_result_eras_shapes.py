"""What a 2026-07-28 server lists and answers, as each era's agents get it through a
running daemon: a tool whose output schema is an array's is listed to a legacy agent
without that schema and its result without the array, on the socket (spliced or not)
and over HTTP; a modern agent gets both. A legacy server's ``execution`` reaches no
modern agent. No agent is told the upstream server's name for itself. An agent that
answers mcpd's relayed question with an error does not give the call its code."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.clients.daemon_http import post, socket_get

SUPPORT = Path(__file__).resolve().parents[3] / "support"
CANNED = str(SUPPORT / "servers" / "canned.py")
TASKS = str(SUPPORT / "asking" / "legacy_task_server.py")
ARRAY = {"type": "array", "items": {"type": "string"}}
OBJECT = {"type": "object", "properties": {"n": {"type": "integer"}}}
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
ANSWERS = {
    "tools": {
        "arr": {
            "resultType": "complete",
            "content": [{"type": "text", "text": "a, b"}],
            "structuredContent": ["a", "b"],
            "_meta": {SERVER_INFO: {"name": "upstream", "version": "9"}, "k": 1},
        },
        "bare": {"resultType": "complete", "content": [], "structuredContent": [1, 2]},
        "obj": {
            "resultType": "complete",
            "content": [{"type": "text", "text": "n=1"}],
            "structuredContent": {"n": 1},
        },
        "roots": {
            "resultType": "input_required",
            "inputRequests": {"where": {"method": "roots/list"}},
            "requestState": "s1",
        },
    },
    "defs": {"arr": {"outputSchema": ARRAY}, "bare": {"outputSchema": ARRAY}},
}
ANSWERS["defs"]["obj"] = {"outputSchema": OBJECT}
LEGACY_INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "legacy-host", "version": "0"},
}


def canned(tmp_path: Path) -> dict[str, Any]:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(ANSWERS))
    return {"command": sys.executable, "args": [CANNED, str(answers)]}


def by_name(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in tools}


@pytest.mark.parametrize("splice", [True, False])
async def test_a_legacy_agent_gets_the_array_tool_and_its_result_in_its_eras_shape(
    tmp_path: Path, splice: bool
) -> None:
    cfg = make_config(tmp_path, {"s": canned(tmp_path)})
    with trio.fail_after(30):
        async with running(cfg, splice=splice) as daemon:
            async with connect(daemon.socket_path, modern=False) as agent:
                await agent.initialize()
                tools = by_name(await agent.tools())
                assert "outputSchema" not in tools["mcp__s__arr"]
                assert tools["mcp__s__obj"]["outputSchema"] == OBJECT
                got = await agent.call("mcp__s__arr")
                assert got == {"content": [{"type": "text", "text": "a, b"}], "_meta": {"k": 1}}
                bare = await agent.call("mcp__s__bare")
                [block] = bare.pop("content")
                assert bare == {} and block["type"] == "text"
                assert json.loads(block["text"]) == [1, 2]  # the JSON, as the server wrote it
                obj = await agent.call("mcp__s__obj")
                assert obj["structuredContent"] == {"n": 1} and "resultType" not in obj
            async with connect(daemon.socket_path, modern=True) as agent:
                tools = by_name(await agent.tools())
                assert tools["mcp__s__arr"]["outputSchema"] == ARRAY
                got = await agent.call("mcp__s__arr")
                assert got["structuredContent"] == ["a", "b"]
                assert got["resultType"] == "complete" and got["_meta"] == {"k": 1}
            # What a person reviews is the server's own definition.
            page = json.loads(await socket_get(daemon.socket_path, "/tools"))
            assert by_name(page["tools"])["mcp__s__arr"]["outputSchema"] == ARRAY


async def test_a_legacy_session_over_http_gets_the_same_shapes(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"s": canned(tmp_path)})
    with trio.fail_after(30):
        async with running(cfg) as daemon:
            sock = daemon.socket_path
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": LEGACY_INIT}
            opened = await post(sock, init)
            session = opened.headers["mcp-session-id"]
            headers = (f"Mcp-Session-Id: {session}", "MCP-Protocol-Version: 2025-11-25")
            done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await post(sock, done, *headers)

            async def ask(rid: int, method: str, params: dict[str, Any]) -> Any:
                body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
                reply = await post(sock, body, *headers)
                if reply.headers.get("content-type", "").startswith("text/event-stream"):
                    return reply.events()[-1]["result"]
                return reply.json()["result"]

            tools = by_name((await ask(2, "tools/list", {}))["tools"])
            assert "outputSchema" not in tools["mcp__s__arr"]
            got = await ask(3, "tools/call", {"name": "mcp__s__arr", "arguments": {}})
            assert got == {"content": [{"type": "text", "text": "a, b"}], "_meta": {"k": 1}}


@pytest.mark.parametrize("modern", [True, False])
async def test_a_legacy_servers_execution_is_listed_to_legacy_agents_only(
    tmp_path: Path, modern: bool
) -> None:
    server = {"command": sys.executable, "args": [TASKS, str(tmp_path / "server.in")]}
    cfg = make_config(tmp_path, {"jobs": server})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path, modern) as agent:
            if not modern:
                await agent.initialize()
            quick = by_name(await agent.tools())["mcp__jobs__quick"]
            if modern:
                assert "execution" not in quick
            else:
                assert quick["execution"] == {"taskSupport": "optional"}


async def test_an_agents_error_to_a_relayed_question_is_not_the_calls_code(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"s": canned(tmp_path)})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path, modern=False) as agent:
            await agent.result("initialize", {**LEGACY_INIT, "capabilities": {"roots": {}}})
            await agent.send_raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            replies: list[dict[str, Any]] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    params = {"name": "mcp__s__roots", "arguments": {}}
                    replies.append(await agent.rpc("tools/call", params))

                nursery.start_soon(call)
                [asked] = await agent.wait_unmatched(1)
                assert asked["method"] == "roots/list"
                nope = {"code": -32601, "message": "Method not found"}
                answer = {"jsonrpc": "2.0", "id": asked["id"], "error": nope}
                await agent.send_raw(json.dumps(answer).encode() + b"\n")
            [reply] = replies
            error = reply["error"]
            assert error["code"] != -32601
            assert "the agent could not answer roots/list: Method not found" in error["message"]


@pytest.mark.parametrize("page_size", [0, 64])
async def test_a_listing_in_pieces_or_pages_is_in_the_agents_era_shape_too(
    tmp_path: Path, page_size: int
) -> None:
    names = [f"t{i:03}" for i in range(300)]  # more than one piece of a long reply
    answers = tmp_path / "answers.json"
    ok = {"resultType": "complete", "content": []}
    defs = {name: {"outputSchema": ARRAY} for name in names[::2]}
    answers.write_text(json.dumps({"tools": dict.fromkeys(names, ok), "defs": defs}))
    server = {"command": sys.executable, "args": [CANNED, str(answers)]}
    cfg = make_config(tmp_path, {"s": server}, page_size=page_size)
    with trio.fail_after(30):
        async with running(cfg) as daemon:
            for modern in (False, True):
                async with connect(daemon.socket_path, modern) as agent:
                    if not modern:
                        await agent.initialize()
                    tools = await agent.tools()
                    assert [t["name"] for t in tools] == [f"mcp__s__{n}" for n in names]
                    schemas = [t.get("outputSchema") for t in tools]
                    assert schemas == [ARRAY if modern and i % 2 == 0 else None for i in range(300)]


NAMED = {SERVER_INFO: {"name": "upstream", "version": "9"}, "k": 1}
OTHER_ANSWERS = {
    "tools": {},
    "methods": {
        "prompts/list": {"resultType": "complete", "prompts": [{"name": "p1"}]},
        "prompts/get": {
            "resultType": "complete",
            "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            "_meta": NAMED,
        },
        "resources/list": {
            "resultType": "complete",
            "resources": [{"uri": "file:///a", "name": "a"}],
        },
        "resources/read": {
            "resultType": "complete",
            "ttlMs": 5000,
            "cacheScope": "private",
            "contents": [{"uri": "file:///a", "text": "body"}],
            "_meta": {SERVER_INFO: {"name": "upstream", "version": "9"}},
        },
        "completion/complete": {
            "resultType": "complete",
            "completion": {"values": ["x"]},
            "_meta": NAMED,
        },
    },
}


@pytest.mark.parametrize("modern", [False, True])
async def test_prompts_reads_and_completions_reach_each_era_in_its_shape(
    tmp_path: Path, modern: bool
) -> None:
    """Every agent got the upstream's name for itself in these results, and a legacy
    one a resultType (and a read's ttlMs and cacheScope) its era does not have."""
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(OTHER_ANSWERS))
    server = {"command": sys.executable, "args": [CANNED, str(answers)]}
    cfg = make_config(tmp_path, {"s": server})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path, modern=modern) as agent:
            if not modern:
                await agent.initialize()
            prompt = await agent.result("prompts/get", {"name": "mcp__s__p1"})
            read = await agent.result("resources/read", {"uri": "mcpd://s/file:///a"})
            ref = {"type": "ref/prompt", "name": "mcp__s__p1"}
            done = await agent.result(
                "completion/complete", {"ref": ref, "argument": {"name": "x", "value": ""}}
            )
    assert prompt["messages"][0]["content"]["text"] == "hi"
    assert read["contents"][0]["text"] == "body"
    assert done["completion"]["values"] == ["x"]
    for got in (prompt, read, done):
        assert SERVER_INFO not in got.get("_meta", {}), got
        assert ("resultType" in got) is modern, got
    assert prompt["_meta"]["k"] == 1 and done["_meta"]["k"] == 1
    if modern:
        assert read["ttlMs"] == 5000 and read["cacheScope"] == "private"
    else:
        assert "ttlMs" not in read and "cacheScope" not in read


async def test_an_agents_answer_with_both_a_result_and_an_error_ends_the_call(
    tmp_path: Path,
) -> None:
    """JSON-RPC allows one of the two: the answer is refused, and the call it was asked
    for ends saying so, rather than wait for another answer."""
    cfg = make_config(tmp_path, {"s": canned(tmp_path)})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path, modern=False) as agent:
            await agent.result("initialize", {**LEGACY_INIT, "capabilities": {"roots": {}}})
            await agent.send_raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            replies: list[dict[str, Any]] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    params = {"name": "mcp__s__roots", "arguments": {}}
                    replies.append(await agent.rpc("tools/call", params))

                nursery.start_soon(call)
                [asked] = await agent.wait_unmatched(1)
                assert asked["method"] == "roots/list"
                nope = {"code": -32601, "message": "Method not found"}
                answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": []}}
                answer["error"] = nope
                await agent.send_raw(json.dumps(answer).encode() + b"\n")
            [reply] = replies
            message = reply["error"]["message"]
            assert "the agent could not answer roots/list" in message
            assert "both a result and an error" in message
