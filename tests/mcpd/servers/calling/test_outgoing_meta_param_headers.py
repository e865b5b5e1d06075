"""The Mcp-Param-* headers a modern HTTP server's tool call carries: only those of the
tool mcpd keeps (the first of a name listed twice), never of a definition it drops,
which no agent was shown and no pin holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.http_servers.serving import Responder, SeenRequest, result, serve_http

LIMIT = 30


def tool(name: str, headers: dict[str, str]) -> dict[str, Any]:
    """A tool taking ``password`` and ``region``, the ``headers`` of which (argument to
    header name) are annotated as going in Mcp-Param-* headers."""
    properties: dict[str, Any] = {"password": {"type": "string"}, "region": {"type": "string"}}
    for argument, header in headers.items():
        properties[argument] = {**properties[argument], "x-mcp-header": header}
    return {"name": name, "inputSchema": {"type": "object", "properties": properties}}


# Page one: `a` without headers; `b` with its region in one, then `b` again putting the
# password in another. Page two: `a` again, its password in a header.
PAGES: dict[str | None, dict[str, Any]] = {
    None: {
        "tools": [
            tool("a", {}),
            tool("b", {"region": "Region"}),
            tool("b", {"password": "Leaked-Password"}),
        ],
        "nextCursor": "two",
    },
    "two": {"tools": [tool("a", {"password": "Leaked-Password"})]},
}


async def modern(req: SeenRequest, respond: Responder) -> None:
    if req.method != "POST":
        await respond.reply(405)
    elif req.rpc_method == "server/discover":
        found = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
        await respond.json(result(req.rpc_id, {"resultType": "complete", **found}))
    elif req.rpc_method == "tools/list":
        cursor = (req.message.get("params") or {}).get("cursor")
        await respond.json(result(req.rpc_id, {"resultType": "complete", **PAGES[cursor]}))
    elif req.rpc_method == "tools/call":
        done = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
        await respond.json(result(req.rpc_id, done))
    else:
        await respond.reply(202)


def param_headers(req: SeenRequest) -> dict[str, str]:
    return {k: v for k, v in req.headers if k.startswith("mcp-param-")}


async def test_a_tool_listed_twice_calls_with_the_headers_of_the_one_kept(tmp_path: Path) -> None:
    arguments = {"password": "hunter2", "region": "eu"}
    with trio.fail_after(LIMIT):
        async with serve_http(modern) as srv:
            cfg = make_config(tmp_path, {"hh": {"url": srv.url()}})
            async with running(cfg), connect(cfg.daemon.socket) as agent:
                listed = {t["name"]: t for t in await agent.tools()}
                assert {"mcp__hh__a", "mcp__hh__b"} <= listed.keys()
                for name in ("mcp__hh__a", "mcp__hh__b"):
                    done = await agent.call(name, arguments)
                    assert done["content"][0]["text"] == "done", done

    calls = {r.message["params"]["name"]: r for r in srv.requests if r.rpc_method == "tools/call"}
    # The dropped `a` of page two put no argument in a header.
    assert param_headers(calls["a"]) == {}
    # The kept `b` holds its own header, and the dropped one's adds none.
    assert param_headers(calls["b"]) == {"mcp-param-region": "eu"}
    assert all("hunter2" not in v for r in calls.values() for _, v in r.headers)
