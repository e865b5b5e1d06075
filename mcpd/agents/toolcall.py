"""tools/list and tools/call from an agent: paging, routing by local name, and the
reply for each outcome.

A call is started without a task of its own: the servers' side calls back with the
outcome, which becomes the reply there and then. The HTTP side, which answers one
request per exchange, awaits the same path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET, Raw

from protocol import jsonrpc as rpc
from protocol import mcp, splice, surface
from protocol.server import RequestContext

from ..servers.calls import Outcome
from ..servers.outage import Outage
from ..servers.progress import Deliver
from .backend import CallHandle, Servers
from .paging import page
from .results import shape_call_result


def list_tools(
    servers: Servers, params: mcp.ListToolsParams, ctx: RequestContext | None, page_size: int
) -> mcp.ListToolsResult:
    servers.refresh()
    tools, after = page(servers.listing(), params.cursor, page_size)
    modern = ctx is not None and ctx.era == "modern"
    return mcp.ListToolsResult(
        tools=list(tools),
        nextCursor=UNSET if after is None else after,
        ttlMs=0 if modern else UNSET,
        cacheScope="private" if modern else UNSET,
        meta={"mcpd/servers": servers.states()},
    )


class Route(msgspec.Struct):
    params: mcp.CallToolParams
    alias: str
    modern: bool
    # A modern agent's capabilities go upstream, so a server may ask it for input.
    capabilities: dict[str, Any] | None
    local: str = ""  # the name the agent called
    # The agent takes task handles (io.modelcontextprotocol/tasks) for results.
    tasks: bool = False
    owner: Any = None  # whose call it is (a task it creates is that agent's alone)


# The last step before a result is written, for a result that may hold links or task
# handles: (the call's route, result, whether it may hold links) -> result.
Finish = Callable[[Route, Raw | dict[str, Any], bool], Raw | dict[str, Any]]


# Where a call's reply goes: (its id, the line, whether the line was spliced).
Deliver_ = Callable[[rpc.Id, bytes, bool], None]

# How arguments that are an object, or null, begin.
_OBJECT_OR_NULL = (ord("{"), ord("n"))


def route_call(
    servers: Servers,
    rid: rpc.Id,
    ctx: RequestContext | None,
    params: mcp.CallToolParams,
) -> Route | bytes:
    """Where the call goes, or the finished reply when it goes nowhere.

    Raises rpc.InvalidParams for arguments that are not an object."""
    # Arguments are an object (or null); anything else used to reach the server as it
    # was, and a server that crashed on it took every other agent's calls down too.
    args = params.arguments
    if isinstance(args, msgspec.Raw) and (not args or memoryview(args)[0] not in _OBJECT_OR_NULL):
        raise rpc.InvalidParams("tools/call arguments must be an object")
    modern = ctx is not None and ctx.era == "modern"
    entry = servers.lookup(params.name)
    if entry is None:
        down = servers.down_for(params.name)
        if down is not None:
            return _error_reply(
                rid, f"No tool {_clip(params.name)!r} is listed now. {down}", modern
            )
        near = servers.closest(params.name)
        hint = f" Did you mean: {', '.join(near)}?" if near else ""
        return _error_reply(
            rid,
            f"Unknown tool {_clip(params.name)!r}.{hint} Call tools/list for the current tools.",
            modern,
        )
    if entry.held is not None:
        return held_reply(rid, "tool", params.name, entry.alias, entry.original, entry.held, modern)
    local = params.name
    params.name = entry.original
    caps = ctx.capabilities if modern and ctx is not None else None
    tasks = bool(caps) and surface.has_tasks(caps)
    return Route(params, entry.alias, modern, caps, local, tasks)


def start_call(
    servers: Servers,
    rid: rpc.Id,
    route: Route,
    budget: int,
    on_progress: Deliver | None,
    deliver: Deliver_,
    finish: Finish | None = None,
    asker: Any = None,
) -> CallHandle | None:
    """Start the routed call; ``deliver`` gets the encoded reply exactly once (maybe
    before this returns), unless the call is cancelled through the handle."""

    # The one object made per call on this path: no closure per step.
    def done(outcome: Outcome) -> None:
        if not isinstance(outcome, Raw):
            deliver(rid, call_reply(rid, route, outcome, budget, finish), False)
            return
        result = shaped(route, outcome, budget, finish)
        if isinstance(result, Raw) and splice.ENABLED:
            # It passes as the server sent it: spliced around its bytes.
            deliver(rid, splice.reply(rid, result), True)
        else:
            deliver(rid, rpc.encode_result(rid, result), False)

    handle = servers.start_call(
        route.alias,
        route.params,
        done,
        capabilities=route.capabilities,
        on_progress=on_progress,
        asker=asker,
    )
    if handle is None:
        deliver(
            rid,
            _error_reply(
                rid,
                f"The tool server {route.alias!r} is not running (removed from the configuration).",
                route.modern,
            ),
            False,
        )
    return handle


def shaped(
    route: Route, result: Raw, budget: int, finish: Finish | None = None
) -> Raw | dict[str, Any]:
    """A server's result as its agent gets it: its kind and budget, its links."""
    out, links = shape_call_result(
        result,
        modern=route.modern,
        budget=budget,
        alias=route.alias,
        capabilities=route.capabilities,
        tasks=route.tasks,
    )
    if finish is not None and (links or route.tasks):
        out = finish(route, out, links)
    return out


def call_reply(
    rid: rpc.Id, route: Route, outcome: Outcome, budget: int, finish: Finish | None = None
) -> bytes:
    if isinstance(outcome, Outage):
        result = outcome.result()
        if route.modern:
            result.resultType = mcp.COMPLETE
        return rpc.encode_result(rid, result)
    if isinstance(outcome, rpc.RPCError):
        return rpc.encode_error(rid, outcome.code, outcome.message, outcome.data)
    return rpc.encode_result(rid, shaped(route, outcome, budget, finish))


def _error_reply(rid: rpc.Id, text: str, modern: bool) -> bytes:
    result = mcp.text_result(text, is_error=True)
    if modern:
        result.resultType = mcp.COMPLETE
    return rpc.encode_result(rid, result)


def held_text(kind: str, local: str, alias: str, why: str) -> str:
    """What a model is told of a call to a held tool, prompt or template."""
    return (
        f"The {kind} {_clip(local)!r} of the server {alias!r} is held by mcpd: {why}. "
        "It was not called. Ask the user to review it (`mcpd tools --pending` shows what "
        f"changed); until it is approved, other {kind}s keep working."
    )


def held_meta(alias: str, original: str, why: str) -> dict[str, Any]:
    return {"mcpd/held": {"server": alias, "item": original, "reason": why}}


def held_reply(
    rid: rpc.Id, kind: str, local: str, alias: str, original: str, why: str, modern: bool
) -> bytes:
    """A call to a held tool, refused at the routing step: the server is not asked."""
    result = mcp.text_result(held_text(kind, local, alias, why), is_error=True)
    result.meta = held_meta(alias, original, why)
    if modern:
        result.resultType = mcp.COMPLETE
    return rpc.encode_result(rid, result)


def _clip(name: str, limit: int = 200) -> str:
    """An unknown name as quoted back: a huge one would cost its size again in the reply."""
    return name if len(name) <= limit else f"{name[:limit]}... ({len(name)} characters)"
