"""Streamable HTTP rules for the server end, shared by the demo servers and mcpd's own
``POST /mcp``: which statuses the spec fixes, what a POST must carry, and whether the
routing headers (``Mcp-Method``, ``Mcp-Name``) agree with the body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from protocol.http import mcp_headers
from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.mcp.serving import AgentSession, RequestContext
from protocol.shown.visible import visible

from .wire import Headers, Reject

# The spec fixes these for 2026-07-28; every other JSON-RPC error travels as a 200.
MODERN_STATUS: Final[Mapping[int, int]] = {
    rpc.PARSE_ERROR: 400,
    rpc.INVALID_REQUEST: 400,
    rpc.INVALID_PARAMS: 400,
    rpc.HEADER_MISMATCH: 400,
    rpc.MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    rpc.UNSUPPORTED_PROTOCOL_VERSION: 400,
    rpc.METHOD_NOT_FOUND: 404,
}


def rpc_reject(status: int, id: rpc.Id | None, code: int, message: str) -> Reject:
    return Reject(status, rpc.encode_error(id, code, message))


class _Named(msgspec.Struct):
    name: Any = None
    uri: Any = None


def decode_body(body: bytes) -> rpc.Message:
    try:
        return envelope.decode_message(body)
    except rpc.DecodeFailure as exc:
        raise Reject(400, exc.reply()) from None


def check_post(headers: Headers) -> None:
    content_type = (headers.get("content-type") or "").partition(";")[0].strip().lower()
    if content_type != "application/json":
        message = "Unsupported Media Type: Content-Type must be application/json"
        raise rpc_reject(415, None, rpc.INVALID_REQUEST, message)
    coding = (headers.get("content-encoding") or "identity").strip().lower()
    if coding != "identity":
        message = (
            f"Unsupported Media Type: the body is {visible(coding[:40])}-encoded "
            "(Content-Encoding), which mcpd does not read: send it unencoded"
        )
        raise rpc_reject(415, None, rpc.INVALID_REQUEST, message)
    accept = headers.get("accept")
    if not (accepts(accept, "application/json") and accepts(accept, "text/event-stream")):
        message = "Not Acceptable: Accept must list application/json and text/event-stream"
        raise rpc_reject(406, None, rpc.INVALID_REQUEST, message)


def not_allowed(method: bytes) -> Reject:
    """The 405 of a method /mcp does not take, saying which it takes (no body for a
    HEAD, whose answer carries none)."""
    named = method[:40].decode("ascii", "replace")
    said = f"Method Not Allowed: /mcp takes POST, GET and DELETE, not {named}"
    body = b"" if method == b"HEAD" else rpc.encode_error(None, rpc.INVALID_REQUEST, said)
    return Reject(405, body, [(b"allow", b"GET, POST, DELETE")])


def accepts(accept: str | None, media_type: str) -> bool:
    if accept is None:
        return False
    wildcard = media_type.partition("/")[0] + "/*"
    offered = {part.partition(";")[0].strip().lower() for part in accept.split(",")}
    return bool(offered & {media_type, wildcard, "*/*"})


def header_mismatch(headers: Headers, req: rpc.Request) -> str | None:
    """Why the routing headers disagree with the body, or None when they agree."""
    for name in ("mcp-protocol-version", "mcp-method", "mcp-name"):
        if headers.count(name) > 1:
            return f"{name} appears more than once"
    method = headers.get("mcp-method")
    if method is None:
        return "Mcp-Method is missing"
    if method != req.method:
        return f"Mcp-Method is {method!r}, the body's method is {req.method!r}"
    source = mcp_headers.NAME_SOURCE.get(req.method)
    if source is None:
        return None
    try:
        named = rpc.decode_as(req.params, _Named)
    except rpc.InvalidParams:
        return None  # the handler reports the malformed params
    want = named.uri if source == "uri" else named.name
    raw = headers.get("mcp-name")
    if raw is None:
        return "Mcp-Name is missing" if want is not None else None
    if not raw.isascii():
        return "Mcp-Name carries characters outside ASCII"
    try:
        name = mcp_headers.decode_value(raw)
    except mcp_headers.HeaderValueError as exc:
        return f"Mcp-Name: {exc}"
    if name != want:
        return f"Mcp-Name is {name!r}, the body's {source} is {want!r}"
    return None


def modern_request(
    headers: Headers, body: bytes, version: str, session: AgentSession
) -> tuple[rpc.Request, RequestContext]:
    """Check a 2026-07-28 POST the way the spec asks of a server, and return its request
    and context; raises Reject with the status and JSON-RPC error to answer with."""
    msg = decode_body(body)
    if isinstance(msg, rpc.Notification):
        raise Reject(202)
    if not isinstance(msg, rpc.Request):
        raise rpc_reject(400, None, rpc.INVALID_REQUEST, "Invalid request: not a request")
    req = msg
    if req.method == "initialize":
        message = "initialize belongs to the handshake protocol: send it without "
        raise rpc_reject(400, req.id, rpc.INVALID_REQUEST, message + "MCP-Protocol-Version")
    mismatch = header_mismatch(headers, req)
    if mismatch is not None:
        raise rpc_reject(400, req.id, rpc.HEADER_MISMATCH, f"Header mismatch: {mismatch}")
    try:
        ctx = session.context(req)
    except rpc.RPCError as exc:
        claimed = exc.data.get("requested") if isinstance(exc.data, dict) else version
        if claimed == version:
            status = MODERN_STATUS.get(exc.code, 200)
            raise Reject(status, rpc.encode_error_object(req.id, exc.to_object())) from None
    else:
        claimed = ctx.version
    # A client that disagrees with itself hears that, not that its version is unknown.
    if claimed != version:
        message = f"MCP-Protocol-Version is {version!r}, _meta says {claimed!r}"
        raise rpc_reject(400, req.id, rpc.HEADER_MISMATCH, f"Header mismatch: {message}")
    return req, ctx
