"""Which HTTP transport a server at one URL speaks: Streamable HTTP or the old HTTP+SSE.

The spec's rule for clients that support both (2025-03-26 onwards, "Backwards
Compatibility"): POST an ``initialize`` to the URL; if that works, the server speaks
Streamable HTTP. If it fails with 400, 404 or 405, GET the URL: an event stream
whose first event is ``endpoint`` means the old transport.

Two refinements. Any other 4xx (406, 415, a 2xx that is not MCP) also gets the GET,
since old servers answer a POST to their stream URL in all sorts of ways. And a POST
refused with a JSON-RPC error in its body still counts as Streamable HTTP when the
GET finds no old-style stream: only an MCP endpoint answers in JSON-RPC (a modern-only
server refusing ``initialize`` with -32022 is one). 401/403 raise ``AuthError`` at
once; a server that is down raises its ``TransportError``: neither says anything
about the transport, so the caller retries later as for any outage.
"""

from __future__ import annotations

from typing import Literal, TypeAlias
from urllib.parse import urlsplit

from msgspec.structs import replace

from protocol.jsonrpc import messages as rpc
from protocol.mcp.core import LATEST_LEGACY
from protocol.shown.server_urls import display_url

from ..base import AuthHook
from ..errors import AuthError, HttpRPCError, TransportError, UnexpectedReply
from ..http.params import DEFAULT_HTTP_PARAMS, HttpParams
from ..http.transport import open_http_transport
from .transport import open_legacy_sse_transport

__all__ = ["HttpKind", "detect_http_transport", "looks_like_sse"]

HttpKind: TypeAlias = Literal["streamable-http", "sse"]

_INITIALIZE = {
    "protocolVersion": LATEST_LEGACY,
    "capabilities": {},
    "clientInfo": {"name": "mcpd", "version": "detect"},
}


def looks_like_sse(url: str) -> bool:
    """Whether a URL looks like an old HTTP+SSE stream endpoint: its path ends in /sse."""
    try:
        path = urlsplit(url).path
    except ValueError:
        return False
    return path.rstrip("/").lower().endswith("/sse")


async def detect_http_transport(
    alias: str,
    url: str,
    params: HttpParams = DEFAULT_HTTP_PARAMS,
    *,
    auth: AuthHook | None = None,
) -> HttpKind:
    """Ask the server at ``url`` which transport it speaks (see the module's rule).

    A session the ``initialize`` opened is ended (DELETE), and an old-style stream is
    closed as soon as it named its endpoint: the caller then opens the transport it
    was told and runs the handshake itself. Each step, over one connection, waits at
    most ``params.connect_timeout`` for silence; the caller bounds the whole. Both
    questions carry the credentials ``auth`` hands out, as the transports' messages do:
    a server that wants a token refuses any question without it.
    """
    post_params = replace(params, read_timeout=params.connect_timeout, pool_size=1)
    try:
        async with open_http_transport(alias, url, post_params, auth=auth) as t:
            await t.request("initialize", _INITIALIZE, cancellable=False)
        return "streamable-http"
    except AuthError:
        raise
    except HttpRPCError as exc:
        if not 400 <= exc.http_status < 500:
            return "streamable-http"  # a JSON-RPC error in a 2xx: it speaks MCP here
        post, speaks_rpc = f"HTTP {exc.http_status} ({exc.message})", True
    except rpc.RPCError:
        return "streamable-http"
    except UnexpectedReply as exc:
        if exc.status >= 500:
            raise
        post, speaks_rpc = exc.reason.removeprefix(f"{alias}: "), False

    try:
        async with open_legacy_sse_transport(alias, url, replace(params, pool_size=1), auth=auth):
            return "sse"
    except AuthError:
        raise
    except TransportError as exc:
        if speaks_rpc:
            return "streamable-http"
        get = exc.reason
        raise UnexpectedReply(
            f"{alias}: {display_url(url)} is neither a Streamable HTTP endpoint "
            f"(POST initialize: {post}) "
            f"nor an HTTP+SSE one (GET: {get.removeprefix(f'{alias}: ')})"
        ) from None
