"""An HTTP+SSE (2024-11-05) MCP server behind OAuth, with its authorization server on
the same origin (``oauth.protected_mcp.ProtectedMcp``'s), for the daemon's OAuth tests of the
old transport.

The stream (``GET``, at ``stream_path``), its messages (``POST /messages``) and any
other method at the stream's URL want a live access token first: without one they
get the 401 with the Bearer challenge, as servers behind an authorizing proxy answer.
With one, ``http_servers.legacy_sse`` serves them (a POST to the stream's URL gets 405).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import trio

from tests.support.http_servers.legacy_sse import LegacySSEServer
from tests.support.http_servers.serving import Responder, SeenRequest, serve_http
from tests.support.oauth.protected_mcp import ProtectedMcp


class ProtectedSSE(ProtectedMcp):
    def __init__(self, stream_path: str) -> None:
        super().__init__()
        self.sse = LegacySSEServer()
        self.sse.stream_path = stream_path
        # The Authorization header of each request to the stream and its messages.
        self.seen: list[tuple[str, str, str | None]] = []

    @property
    def mcp_url(self) -> str:
        return f"{self.base}{self.sse.stream_path}"

    @property
    def prm_url(self) -> str:
        return f"{self.base}/.well-known/oauth-protected-resource{self.sse.stream_path}"

    async def __call__(self, req: SeenRequest, respond: Responder) -> None:
        path = urlsplit(req.target).path
        if path == urlsplit(self.prm_url).path and req.method == "GET":
            await respond.json({"resource": self.mcp_url, "authorization_servers": [self.base]})
            return
        if path not in (self.sse.stream_path, "/messages"):
            await super().__call__(req, respond)
            return
        auth = req.header("authorization")
        self.seen.append((req.method, path, auth))
        token = (auth or "").removeprefix("Bearer ")
        if auth is None or not auth.startswith("Bearer ") or token not in self.issued:
            challenge = f'Bearer resource_metadata="{self.prm_url}"'
            await respond.json(
                {"error": "invalid_token"}, 401, headers=[("WWW-Authenticate", challenge)]
            )
            return
        await self.sse(req, respond)


@contextlib.asynccontextmanager
async def serve_protected_sse(stream_path: str = "/sse") -> AsyncIterator[ProtectedSSE]:
    server = ProtectedSSE(stream_path)
    async with trio.open_nursery() as nursery:
        server.sse._nursery = nursery
        async with serve_http(server) as http:
            server._http = http
            server.sse.http = http
            yield server
        nursery.cancel_scope.cancel()
