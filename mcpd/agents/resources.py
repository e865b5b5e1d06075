"""Resources for agents: lists, reads, and subscriptions to updates.

URIs are the agents' (``registry.resource_routes`` says which server each goes to),
read through the agent's profile (its ``Sight``): a server the profile does not show is
no candidate, in errors as in routing, and a URI another server lists too is read
from the one the profile shows. A subscription is held per agent: a legacy agent's
``resources/subscribe``, or the ``resourceSubscriptions`` of a modern agent's
``subscriptions/listen``. Upstream each URI is subscribed once, whatever the number
of agents; an update reaches exactly the agents subscribed to it, under the URI each
subscribed with. A connection holds at most ``MAX_SUBSCRIPTIONS``, and its own are
found without looking through the others' when it ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw

from protocol import jsonrpc as rpc
from protocol import mcp, surface
from protocol.server import RequestContext
from protocol.uritemplate import MAX_URI

from ..registry.claims import Budget
from ..registry.scheme import Ambiguous, Routed, Sight, Undecided
from ..servers.all_servers import AllServers
from .allowance import Allowance
from .askback_driver import AgentSide, AskBackDriver
from .callrecords import Seen
from .paging import page
from .prompts import held_error, request_outcome, serve_asked
from .rewrite import read_result

Send = Callable[[bytes], None]

# Each subscription is held here and at its server, and costs its server a request to
# take and another to let go: without a bound one agent naming URIs without end would
# grow mcpd, slow every agent's turn, and keep the server busy long after it left.
# Far more than an agent watching the resources it works with needs.
MAX_SUBSCRIPTIONS: Final = 1_000


class ResourcesPage(msgspec.Struct, omit_defaults=True):
    resources: list[Any] | msgspec.UnsetType = UNSET
    resourceTemplates: list[Any] | msgspec.UnsetType = UNSET
    nextCursor: str | msgspec.UnsetType = UNSET
    resultType: str | msgspec.UnsetType = UNSET
    ttlMs: int | msgspec.UnsetType = UNSET
    cacheScope: str | msgspec.UnsetType = UNSET
    meta: mcp.Meta | msgspec.UnsetType = msgspec.field(name="_meta", default=UNSET)


def list_resources(
    servers: AllServers,
    params: surface.ListParams,
    ctx: RequestContext | None,
    page_size: int,
    templates: bool,
    sight: Sight | None = None,
) -> ResourcesPage:
    items = servers.template_listing(sight) if templates else servers.resource_listing(sight)
    chunk, after = page(items, params.cursor, page_size)
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
    raise rpc.RPCError(rpc.INVALID_PARAMS, "Resource not found", {"uri": uri})


async def read(
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
    params = rpc.decode_as(req.params, surface.ReadResourceParams)
    asked = seen.name = params.uri
    steps = await allowance.take()
    try:
        routed = route(servers, asked, steps, sight)
        seen.target = (routed.alias, routed.uri)
        whole = servers.held_whole(routed.alias)
        why = whole or servers.held_uri(routed.alias, routed.uri, steps)
    finally:
        allowance.give_back(steps)
    alias = routed.alias
    if why is not None:
        kind = "resource" if whole else "resource template"
        raise held_error(kind, asked, alias, routed.uri, why)
    params.uri = routed.uri
    caps = agent.upstream_capabilities()

    async def upstream(p: surface.ReadResourceParams, asker: Any) -> Any:
        outcome = await request_outcome(servers, alias, "resources/read", p, p.uri, caps, asker)
        data = outcome.data if isinstance(outcome, rpc.RPCError) else None
        if isinstance(data, dict) and data.get("uri") == p.uri:
            outcome.data = {**data, "uri": asked}  # the server's "not found", in our terms
        return outcome

    def rewrite(raw: Raw) -> Any:
        return read_result(raw, servers.links(alias, sight), budget)

    return await serve_asked(
        servers, askback, agent, req, params, asked, alias, upstream, rewrite, seen, True
    )


class Subscriptions:
    def __init__(self, servers: AllServers) -> None:
        self.servers = servers
        # (alias, the server's URI) -> {subscriber: (the agent's URI, send, listen id)}
        self._subs: dict[tuple[str, str], dict[tuple[int, Any], tuple[str, Send, Any]]] = {}
        # id of the owner -> what it holds: (alias, the server's URI), listen id
        self._owned: dict[int, set[tuple[tuple[str, str], Any]]] = {}
        servers.on_resource_updated(self._updated)

    def _hold(
        self, key: tuple[str, str], who: tuple[int, Any], entry: tuple[str, Send, Any]
    ) -> None:
        holders = self._subs.setdefault(key, {})
        if who not in holders:
            self.servers.subscribe_resource(key[0], key[1], True)
            self._owned.setdefault(who[0], set()).add((key, who[1]))
        holders[who] = entry

    def _release(self, key: tuple[str, str], who: tuple[int, Any]) -> None:
        holders = self._subs.get(key)
        if holders is None or holders.pop(who, None) is None:
            return
        self.servers.subscribe_resource(key[0], key[1], False)
        if not holders:
            del self._subs[key]
        owned = self._owned[who[0]]
        owned.discard((key, who[1]))
        if not owned:
            del self._owned[who[0]]

    def _room_for(self, owner: object, more: int) -> None:
        holds = len(self._owned.get(id(owner), ()))
        if holds + more > MAX_SUBSCRIPTIONS:
            raise rpc.RPCError(
                rpc.INVALID_PARAMS,
                f"a connection may hold at most {MAX_SUBSCRIPTIONS} resource subscriptions;"
                f" this one holds {holds} and asks for {more} more: let some go first",
                {"limit": MAX_SUBSCRIPTIONS, "held": holds, "asked": more},
            )

    # -- legacy: resources/subscribe, resources/unsubscribe --

    def subscribe(
        self,
        owner: object,
        uri: str,
        send: Send,
        on: bool,
        steps: Budget,
        sight: Sight | None = None,
    ) -> None:
        # A URI longer than any real one would be held here and upstream at whatever
        # size an agent's line allows: it may be read, never subscribed to.
        if len(uri) > MAX_URI:
            raise rpc.RPCError(
                rpc.INVALID_PARAMS,
                f"a URI of {len(uri)} characters is not subscribed to (at most {MAX_URI})",
            )
        routed = route(self.servers, uri, steps, sight)
        if on and not self.servers.subscribable(routed.alias):
            raise rpc.RPCError(
                rpc.METHOD_NOT_FOUND,
                f"the server {routed.alias!r} does not offer resource subscriptions",
            )
        why = self.servers.held_uri(routed.alias, routed.uri, steps) if on else None
        if why is not None:
            raise held_error("resource", uri, routed.alias, routed.uri, why)
        who = (id(owner), None)
        key = (routed.alias, routed.uri)
        if on:
            if who not in self._subs.get(key, {}):
                self._room_for(owner, 1)
            self._hold(key, who, (uri, send, None))
        else:
            self._release(key, who)

    # -- modern: a listen's resourceSubscriptions --

    def listen(
        self,
        conn: object,
        listen_id: rpc.Id,
        uris: Any,
        send: Send,
        steps: Budget,
        sight: Sight | None = None,
    ) -> list[str]:
        """Hold the URIs a listen names; the subset honoured, for its acknowledgement
        (a URI whose server was not found within ``steps`` is not). Refused whole when
        the URIs it names would take the connection past ``MAX_SUBSCRIPTIONS``."""
        named = uris if isinstance(uris, list) else []
        self._room_for(conn, sum(isinstance(uri, str) for uri in named))
        honoured: list[str] = []
        for uri in named:
            if not isinstance(uri, str) or len(uri) > MAX_URI:
                continue
            try:
                routed = route(self.servers, uri, steps, sight)
            except rpc.RPCError:
                continue
            if self.servers.held_uri(routed.alias, routed.uri, steps) is not None:
                continue
            if self.servers.subscribable(routed.alias):
                key = (routed.alias, routed.uri)
                self._hold(key, (id(conn), listen_id), (uri, send, listen_id))
                honoured.append(uri)
        return honoured

    def unlisten(self, conn: object, listen_id: rpc.Id) -> None:
        owned = self._owned.get(id(conn), set())
        for key in [key for key, held_by in owned if held_by == listen_id]:
            self._release(key, (id(conn), listen_id))

    def owner_gone(self, owner: object) -> None:
        for key, listen_id in list(self._owned.get(id(owner), ())):
            self._release(key, (id(owner), listen_id))

    def _updated(self, alias: str, uri: str) -> None:
        for agent_uri, send, listen_id in list(self._subs.get((alias, uri), {}).values()):
            params: dict[str, Any] = {"uri": agent_uri}
            if listen_id is not None:
                params["_meta"] = {mcp.KEY_SUBSCRIPTION_ID: listen_id}
            send(rpc.encode_notification("notifications/resources/updated", params))
