"""tools/call from an agent: routing by local name, and the reply for each outcome."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from protocol import jsonrpc as rpc
from protocol import mcp
from protocol.server import RequestContext

from ..servers.calls import Outcome
from ..servers.outage import Outage
from .results import shape_call_result

if TYPE_CHECKING:
    from ..daemon import Daemon
    from ..servers.runner import Runner


class Route(msgspec.Struct):
    runner: Runner
    params: mcp.CallToolParams
    alias: str
    modern: bool
    # A modern agent's capabilities go upstream, so a server may ask it for input.
    capabilities: dict[str, Any] | None


def route_call(
    daemon: Daemon,
    req: rpc.Request,
    ctx: RequestContext | None,
    params: mcp.CallToolParams | None = None,
) -> Route | bytes:
    """Where the call goes, or the finished reply when it goes nowhere.

    Raises rpc.InvalidParams for params that are not a tools/call's."""
    if params is None:
        params = rpc.decode_as(req.params, mcp.CallToolParams)
    # Arguments are an object (or null); anything else used to reach the server as it
    # was, and a server that crashed on it took every other agent's calls down too.
    args = params.arguments
    if isinstance(args, msgspec.Raw) and bytes(memoryview(args)[:1]) not in (b"{", b"n"):
        raise rpc.InvalidParams("tools/call arguments must be an object")
    modern = ctx is not None and ctx.era == "modern"
    registry = daemon.registry
    entry = registry.lookup(params.name)
    if entry is None:
        near = registry.closest(params.name)
        hint = f" Did you mean: {', '.join(near)}?" if near else ""
        return _error_reply(
            req.id,
            f"Unknown tool {_clip(params.name)!r}.{hint} Call tools/list for the current tools.",
            modern,
        )
    runner = daemon.supervisor.runners.get(entry.alias)
    if runner is None:
        return _error_reply(
            req.id,
            f"The tool server {entry.alias!r} is not running (removed from the configuration).",
            modern,
        )
    params.name = entry.original
    caps = ctx.capabilities if modern and ctx is not None else None
    return Route(runner, params, entry.alias, modern, caps)


def call_reply(rid: rpc.Id, route: Route, outcome: Outcome, budget: int) -> bytes:
    if isinstance(outcome, Outage):
        result = outcome.result()
        if route.modern:
            result.resultType = mcp.COMPLETE
        return rpc.encode_result(rid, result)
    if isinstance(outcome, rpc.RPCError):
        return rpc.encode_error(rid, outcome.code, outcome.message, outcome.data)
    shaped = shape_call_result(
        outcome,
        modern=route.modern,
        budget=budget,
        alias=route.alias,
        capabilities=route.capabilities,
    )
    return rpc.encode_result(rid, shaped)


def _error_reply(rid: rpc.Id, text: str, modern: bool) -> bytes:
    result = mcp.text_result(text, is_error=True)
    if modern:
        result.resultType = mcp.COMPLETE
    return rpc.encode_result(rid, result)


def _clip(name: str, limit: int = 200) -> str:
    """An unknown name as quoted back: a huge one would cost its size again in the reply."""
    return name if len(name) <= limit else f"{name[:limit]}... ({len(name)} characters)"
