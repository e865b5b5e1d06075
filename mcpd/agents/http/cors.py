"""Cross-origin access to the TCP endpoint, for web pages at the origins it allows.

A page at one of ``http_origins`` (a browser-based MCP client, an inspector) fetches
``/mcp`` with the bearer token in ``Authorization``, which makes its browser ask first
with a preflight (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``)
that carries no token, and then read the answer only if it names the page's origin.
The gate (``tcp``) has checked the ``Origin`` and the ``Host`` before either is
answered here; a page at any other origin is refused there and reads nothing.

A preflight is answered from its headers alone: no session, no token, nothing of the
daemon's state, only what the path lets a page send. The status page's paths are
never answered cross-origin: the page has a session cookie of its own, meant for its
own origin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import h11
import msgspec

from ..page import is_page
from .wire import HeaderList, Headers, Reject

# The methods each path serves, as its ``Allow`` says.
METHODS: Final = {
    "/mcp": "GET, POST, DELETE",
    **dict.fromkeys(
        ("/status", "/tools", "/prompts", "/resources", "/healthz", "/metrics"), "GET, HEAD"
    ),
}
# The request headers mcpd reads. Last-Event-ID is not among them: mcpd's streams
# carry no event ids, so there is nothing to resume from.
READ: Final = (
    "authorization",
    "content-type",
    "accept",
    "mcp-protocol-version",
    "mcp-session-id",
    "mcp-method",
    "mcp-name",
)
# A client sends one of these per argument a tool marks with x-mcp-header, as tools
# listed here may: mcpd reads the arguments from the body, and lets the headers pass.
PARAM_PREFIX: Final = "mcp-param-"
# What a page must read of an answer: the legacy session's id, and what a 401 asks for.
EXPOSED: Final = b"Mcp-Session-Id, WWW-Authenticate"
# Short, so that a browser asks again soon after what is allowed changes.
MAX_AGE: Final = b"300"


def path_of(target: bytes) -> str:
    """The path, as the routes match it."""
    path = target.decode("latin-1").partition("?")[0]
    trimmed = path.rstrip("/") or "/"
    # /mcp is matched as it is; the read-only pages with a trailing slash too.
    return path if trimmed == "/mcp" else trimmed


def is_preflight(request: h11.Request, headers: Headers) -> bool:
    return (
        request.method == b"OPTIONS"
        and headers.get("origin") is not None
        and headers.get("access-control-request-method") is not None
    )


def preflight(request: h11.Request, headers: Headers) -> Reject:
    """The answer to a preflight whose ``Origin`` the gate allowed: 204 with what the
    path lets a page send, or the refusal naming what it may not."""
    path = path_of(request.target)
    methods = METHODS.get(path)
    if methods is None:
        return _refused(404, f"no cross-origin access to {path}")
    method = (headers.get("access-control-request-method") or "").strip()
    if method not in methods.split(", "):
        return _refused(403, f"{path} does not take {method!r}; it takes {methods}")
    asked = [
        h.strip().lower() for h in (headers.get("access-control-request-headers") or "").split(",")
    ]
    asked = [h for h in asked if h]
    unread = [h for h in asked if h not in READ and not h.startswith(PARAM_PREFIX)]
    if unread:
        return _refused(403, f"mcpd reads no {', '.join(unread)} header")
    allowed = [*READ, *(h for h in asked if h.startswith(PARAM_PREFIX))]
    origin = headers.get("origin") or ""
    return Reject(
        204,
        headers=[
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"vary", b"Origin"),
            (b"access-control-allow-methods", methods.encode()),
            (b"access-control-allow-headers", ", ".join(allowed).encode()),
            (b"access-control-max-age", MAX_AGE),
        ],
    )


def answering(origins: frozenset[str]) -> Callable[[h11.Request], HeaderList]:
    """What every answer to a request carries for its origin: for one of ``origins``
    (compared as the gate compares them), the headers that let its page read the
    answer, 401s and errors included, so it can tell what went wrong; nothing for a
    request from anywhere else, a preflight (answered on its own) or the page's."""

    def cors(request: h11.Request) -> HeaderList:
        headers = Headers(request.headers)
        origin = headers.get("origin")
        if origin is None or headers.count("origin") > 1 or is_page(request.target):
            return []
        if origin.rstrip("/").lower() not in origins or is_preflight(request, headers):
            return []
        # No Access-Control-Allow-Credentials: the token goes in a header the page sets
        # itself, so the browser's cookies for this host (the status page's session)
        # are never sent with a page's request, nor its answer read with them.
        return [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"vary", b"Origin"),
            (b"access-control-expose-headers", EXPOSED),
        ]

    return cors


def _refused(status: int, message: str) -> Reject:
    return Reject(status, msgspec.json.encode({"error": message}))
