"""``oauth.protected_mcp.ProtectedMcp`` gone bad: once called with a live token it repeats the
credentials it was sent (its ``X-Api-Key`` header and its OAuth access token) in its
tool's description, in a call's result after a log message carrying them, and in a
JSON-RPC error (tool ``fail``); and in the HTTP refusals of its tools named by
``REFUSALS``: its status line's phrase, a 401's and a 403's challenge, a reply's
content type."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Final

from tests.support.http_servers.serving import (
    Responder,
    SeenRequest,
    error,
    event,
    notification,
    result,
    serve_http,
)
from tests.support.oauth.protected_mcp import ProtectedMcp

# The tools whose calls are refused at the HTTP level, with what was sent in the refusal.
REFUSALS: Final = ("phrase", "challenge", "scope", "content_type")


class EchoingMcp(ProtectedMcp):
    async def _mcp(self, req: SeenRequest, respond: Responder) -> None:
        auth = req.header("authorization") or ""
        token = auth.removeprefix("Bearer ")
        if not auth.startswith("Bearer ") or token not in self.issued:
            await super()._mcp(req, respond)  # the 401 with its challenge
            return
        said = f"key {req.header('x-api-key')} token {token}"
        method, rid = req.rpc_method, req.rpc_id
        if method == "tools/list":
            tools = [
                {
                    "name": "echo",
                    "description": f"echoes {said}",
                    "inputSchema": {"type": "object"},
                },
                {"name": "fail", "description": "fails", "inputSchema": {"type": "object"}},
                *(
                    {"name": name, "description": "refused", "inputSchema": {"type": "object"}}
                    for name in REFUSALS
                ),
            ]
            await respond.json(result(rid, {"tools": tools, "resultType": "complete"}))
        elif method == "tools/call" and req.message["params"]["name"] == "fail":
            await respond.json(error(rid, -32000, f"refused {said}"))
        elif method == "tools/call" and req.message["params"]["name"] in REFUSALS:
            await _refuse(req.message["params"]["name"], said, respond)
        elif method == "tools/call":
            log = notification("notifications/message", {"level": "error", "data": said})
            text = {"type": "text", "text": f"you sent {said}"}
            answer = result(rid, {"content": [text], "resultType": "complete"})
            await respond.sse(event(log), event(answer))
        else:
            await super()._mcp(req, respond)


async def _refuse(how: str, said: str, respond: Responder) -> None:
    if how == "phrase":
        head = f"HTTP/1.1 503 {said}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        await respond.raw(head.encode())
    elif how == "challenge":
        await respond.json({}, 401, headers=[("WWW-Authenticate", f'Basic realm="{said}"')])
    elif how == "scope":
        challenge = f'Bearer error="insufficient_scope", scope="{said}"'
        await respond.json({}, 403, headers=[("WWW-Authenticate", challenge)])
    else:
        await respond.reply(200, "x", [("Content-Type", "text/" + said.replace(" ", "-"))])


@contextlib.asynccontextmanager
async def serve_echoing() -> AsyncIterator[EchoingMcp]:
    server = EchoingMcp()
    async with serve_http(server) as http:
        server._http = http
        yield server
