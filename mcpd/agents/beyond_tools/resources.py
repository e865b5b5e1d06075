"""Resources for agents: lists and reads.

URIs are the agents' (``registry.uris.resource_routes`` says which server each goes to),
read through the agent's profile (its ``Sight``): a server the profile does not show is
no candidate, in errors as in routing, and a URI another server lists too is read
from the one the profile shows. Subscriptions to updates are held in ``agents.news.subscriptions``.
"""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import UNSET, Raw

from protocol.jsonrpc import messages as rpc
from protocol.lines.json_values import parts_at_most
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.mcp.serving import RequestContext
from protocol.shown.visible import quote

from ...registry.uris.claims import Budget
from ...registry.uris.resources import Hold
from ...registry.uris.scheme import Ambiguous, Routed, Sight, Undecided
from ...servers.all_servers import AllServers
from ...servers.shared import Asker
from ..askback.driver import AgentSide, AskBackDriver
from ..calls.callrecords import Seen
from ..calls.rewrite import read_result
from ..lists.list_hints import LIST_RESOURCES
from ..lists.paging import page_of
from .allowance import Allowance
from .prompts import Fetched, Refused, held_read_error, request_outcome, serve_asked

# The values and keys an error's data may hold to have the resource it names renamed.
_NAMING_PARTS: Final = 1_000


class ResourcesPage(msgspec.Struct, omit_defaults=True):
    resources: list[Raw] | msgspec.UnsetType = UNSET
    resourceTemplates: list[Raw] | msgspec.UnsetType = UNSET
    nextCursor: str | msgspec.UnsetType = UNSET
    resultType: str | msgspec.UnsetType = UNSET
    ttlMs: int | msgspec.UnsetType = UNSET
    cacheScope: str | msgspec.UnsetType = UNSET
    meta: mcp.Meta | msgspec.UnsetType = msgspec.field(name="_meta", default=UNSET)


def list_resources(
    servers: AllServers,
    params: mcp.ListParams,
    ctx: RequestContext | None,
    page_size: int,
    templates: bool,
    sight: Sight | None = None,
) -> ResourcesPage:
    items = servers.template_listing(sight) if templates else servers.resource_listing(sight)
    chunk, after = page_of(items, params.cursor, page_size, bytes)
    modern = ctx is not None and ctx.era == "modern"
    out = ResourcesPage(
        nextCursor=UNSET if after is None else after,
        ttlMs=0 if modern else UNSET,
        cacheScope="private" if modern else UNSET,
    )
    if templates:
        out.resourceTemplates = list(chunk)
    else:
        out.resources = list(chunk)
    return out


def route(servers: AllServers, uri: str, budget: Budget, sight: Sight | None = None) -> Routed:
    """The server an agent's URI belongs to among those its profile shows; the agent's
    error when there is none."""
    found = servers.route_uri(uri, budget, sight)
    if isinstance(found, Routed) and (
        sight is None or sight.admits_resource(found.alias, found.uri)
    ):
        return found
    if isinstance(found, Undecided):
        raise rpc.RPCError(
            rpc.INVALID_PARAMS,
            f"no server was found for {uri[:200]!r} within the {found.steps} steps of "
            "matching a URI may take: the servers' resource templates are too costly to "
            "match it against; name its server: mcpd://SERVER/ followed by the URI",
            {"uri": uri},
        )
    if isinstance(found, Ambiguous):
        raise rpc.RPCError(
            rpc.INVALID_PARAMS,
            f"{len(found.candidates)} servers have {uri!r}; read one of "
            + ", ".join(found.candidates),
            {"uri": uri, "candidates": found.candidates},
        )
    raise not_found(uri)


def not_found(uri: str) -> rpc.RPCError:
    """The error the spec gives an unknown URI (its code, the URI in its data), saying
    which URI (an agent's string: quoted as a server's is) and where to look instead."""
    return rpc.RPCError(
        rpc.INVALID_PARAMS, f"Resource not found: {quote(uri)}. {LIST_RESOURCES}", {"uri": uri}
    )


async def read_resource(
    servers: AllServers,
    askback: AskBackDriver,
    agent: AgentSide,
    req: rpc.Request,
    budget: int,
    allowance: Allowance,
    sight: Sight | None = None,
    seen: Seen | None = None,
) -> bytes:
    """``seen``: filled in with what the request named and came to, for its record."""
    seen = seen or Seen()
    params = rpc.decode_as(req.params, features.ReadResourceParams)
    asked = seen.name = params.uri
    steps = await allowance.take()
    try:
        routed = route(servers, asked, steps, sight)
        seen.target = (routed.alias, routed.uri)
        hold = _held(servers, routed.alias, routed.uri, steps)
    finally:
        allowance.give_back(steps)
    alias = routed.alias
    if hold is not None:
        raise held_read_error(asked, alias, routed.uri, hold)
    params.uri = routed.uri
    caps = agent.upstream_capabilities()

    rounds = 0

    async def upstream(p: features.ReadResourceParams, asker: Asker | None) -> Fetched:
        # Sent again with the agent's answers, it is routed again first: the resource
        # may have left the agent's view, or been held, while the agent answered.
        nonlocal rounds
        rounds += 1
        if rounds > 1:
            refused = await _still_readable(servers, asked, (alias, p.uri), allowance, sight)
            if refused is not None:
                return refused
        outcome = await request_outcome(
            servers, alias, "resources/read", p, p.uri, caps, asker, agent.whose
        )
        if isinstance(outcome, rpc.RPCError):
            _name_asked(servers, alias, outcome, p.uri, asked)  # its "not found", in our terms
        return outcome

    def rewrite(raw: Raw) -> Raw | rpc.JsonObject:
        return read_result(raw, servers.links(alias, sight), budget)

    return await serve_asked(
        servers,
        askback,
        agent,
        req,
        params,
        asked,
        alias,
        upstream,
        rewrite,
        seen,
        UNSET,
        budget,
        True,
    )


class _Named(msgspec.Struct):
    uri: object = None


async def _still_readable(
    servers: AllServers,
    asked: str,
    target: tuple[str, str],
    allowance: Allowance,
    sight: Sight | None,
) -> Refused | None:
    """None when ``asked`` still routes to ``target`` (its server, the server's URI),
    neither held; else mcpd's refusal, as the first round would have made it."""
    steps = await allowance.take()
    try:
        routed = route(servers, asked, steps, sight)
        if (routed.alias, routed.uri) != target:
            return Refused.of(not_found(asked))
        hold = _held(servers, routed.alias, routed.uri, steps)
    except rpc.RPCError as exc:
        return Refused.of(exc)
    finally:
        allowance.give_back(steps)
    if hold is None:
        return None
    return Refused.of(held_read_error(asked, routed.alias, routed.uri, hold))


def _held(servers: AllServers, alias: str, uri: str, steps: Budget) -> Hold | None:
    """Why reading ``uri`` of ``alias`` is refused (None: it is not): its server held
    whole, listed or not, or a held template of it."""
    whole = servers.held_whole(alias)
    return Hold(whole) if whole is not None else servers.held_uri(alias, uri, steps)


def _name_asked(
    servers: AllServers, alias: str, error: rpc.RPCError, served: str, asked: str
) -> None:
    """``error`` (``alias``'s) with its data naming the resource as the agent asked for
    it where it names it as the server serves it. Read whole only when it holds as few
    values as a "not found" does: the rest of a server's data goes on as its bytes."""
    named = error.data_as(_Named)
    if named is None or named.uri != served:
        return
    data = error.data
    if isinstance(data, Raw):
        if parts_at_most(data, _NAMING_PARTS) > _NAMING_PARTS:
            return
        data = msgspec.json.decode(data)
    if isinstance(data, dict):
        error.data = servers.written(alias, {**data, "uri": asked}, "a resources/read error")
