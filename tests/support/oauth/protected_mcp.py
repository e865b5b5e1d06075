"""``oauth.server.OAuthServer`` with a real (small) 2026-07-28 MCP endpoint behind it,
for tests of the daemon's side of OAuth: a server mcpd can list and call once it
holds a token.

``/mcp`` answers ``server/discover``, ``tools/list`` (one tool, ``whoami``) and
``tools/call`` for requests with a live token, and the 401 challenge otherwise.
The token endpoint can be held shut (``gate``) to catch requests that arrive while
a token request is under way, or hold its answer once the tokens are issued
(``answer_gate``), and counts its requests by grant type.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import trio

from tests.support.clients.agent import Agent
from tests.support.http_servers.serving import Responder, SeenRequest, error, result, serve_http
from tests.support.oauth.browser_step import follow_authorization
from tests.support.oauth.server import OAuthServer
from transports.http.oauth_client import OAuthHttp

TOOL = {
    "name": "whoami",
    "description": "Say which token the call came with.",
    "inputSchema": {"type": "object", "properties": {}},
}


class ProtectedMcp(OAuthServer):
    def __init__(self) -> None:
        super().__init__()
        self.grants: Counter[str] = Counter()
        self.token_request = trio.Event()  # set when a token request arrives
        self.gate: trio.Event | None = None  # while set to an unset Event: token requests wait
        self.calls: list[str] = []  # the token each tools/call came with
        # While set to an unset Event: a token response waits, its tokens issued
        # (``issued_held`` is set then), as from a slow authorization server.
        self.answer_gate: trio.Event | None = None
        self.issued_held = trio.Event()
        self.refused = trio.Event()  # set when /mcp answers a 401
        # A scope a call's token must have been asked with, else a 403 insufficient_scope.
        self.need_scope: str | None = None

    def revoke_access(self) -> None:
        """The server forgets every access token (as if they all expired)."""
        self.issued.clear()

    def revoke_everything(self) -> None:
        self.issued.clear()
        self.live_refresh.clear()

    async def _token(self, req: SeenRequest, respond: Responder) -> None:
        self.grants[self._form(req).get("grant_type", "?")] += 1
        self.token_request.set()
        if self.gate is not None:
            await self.gate.wait()
        await super()._token(req, respond)

    async def _answer_tokens(self, respond: Responder, answer: dict[str, Any]) -> None:
        if self.answer_gate is not None:
            self.issued_held.set()
            await self.answer_gate.wait()
        await super()._answer_tokens(respond, answer)

    async def _mcp(self, req: SeenRequest, respond: Responder) -> None:
        auth = req.header("authorization") or ""
        token = auth.removeprefix("Bearer ")
        if not auth.startswith("Bearer ") or token not in self.issued:
            self.refused.set()
            await super()._mcp(req, respond)  # the 401 with its challenge
            return
        method, rid = req.rpc_method, req.rpc_id
        if self.need_scope is not None and self.need_scope not in self.scope_of[token].split():
            challenge = f'Bearer error="insufficient_scope", scope="{self.need_scope}"'
            headers = [("WWW-Authenticate", challenge)]
            await respond.json({"error": "insufficient_scope"}, 403, headers=headers)
            return
        answer: dict[str, Any]
        if method == "server/discover":
            answer = result(
                rid,
                {
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}},
                    "resultType": "complete",
                },
            )
        elif method == "tools/list":
            answer = result(rid, {"tools": [TOOL], "resultType": "complete"})
        elif method == "tools/call":
            self.calls.append(token)
            text = {"type": "text", "text": f"called with token #{self.issued.index(token) + 1}"}
            answer = result(rid, {"content": [text], "resultType": "complete"})
        else:
            answer = error(rid, -32601, f"no method {method}")
        await respond.json(answer)


@contextlib.asynccontextmanager
async def serve_protected(server: ProtectedMcp | None = None) -> AsyncIterator[ProtectedMcp]:
    server = server or ProtectedMcp()
    async with serve_http(server) as http:
        server._http = http
        yield server


# The redirect address the daemon tests log in with (nothing listens there: the test's
# browser follows the authorization to it and hands the address over).
REDIRECT = "http://127.0.0.1:33419/callback"


async def login(agent: Agent, srv: ProtectedMcp, alias: str = "t") -> dict[str, Any]:
    """``mcpd auth login`` through the socket, with a browser that follows the
    authorization URL to where it redirects (the test server approves at once)."""
    start = await agent.result("mcpd/auth/login", {"server": alias, "redirect_uri": REDIRECT})
    http = OAuthHttp()
    redirect = await follow_authorization(http, start["url"], await http.policy_for(srv.mcp_url))
    done = {"server": alias, "login": start["login"], "redirect": redirect}
    return await agent.result("mcpd/auth/complete", done)  # type: ignore[no-any-return]
