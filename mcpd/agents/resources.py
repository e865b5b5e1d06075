"""Resources for agents: lists, reads, and subscriptions to updates.

URIs are the agents' (``registry.resources`` says which server each goes to), read
through the agent's profile (its ``Sight``): a server the profile does not show is
no candidate, in errors as in routing, and a URI another server lists too is read
from the one the profile shows. A subscription is held per agent: a legacy agent's
``resources/subscribe``, or the ``resourceSubscriptions`` of a modern agent's
``subscriptions/listen``. Upstream each URI is subscribed once, whatever the number
of agents; an update reaches exactly the agents subscribed to it, under the URI each
subscribed with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET, Raw

from protocol import jsonrpc as rpc
from protocol import mcp, surface
from protocol.server import RequestContext

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
        why = servers.held_template(routed.alias, routed.uri, steps)
    finally:
        allowance.give_back(steps)
    alias = routed.alias
    if why is not None:
        raise held_error("resource template", asked, alias, routed.uri, why)
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
        servers.on_resource_updated(self._updated)

    def _hold(
        self, key: tuple[str, str], who: tuple[int, Any], entry: tuple[str, Send, Any]
    ) -> None:
        holders = self._subs.setdefault(key, {})
        if who not in holders:
            self.servers.subscribe_resource(key[0], key[1], True)
        holders[who] = entry

    def _release(self, key: tuple[str, str], who: tuple[int, Any]) -> None:
        holders = self._subs.get(key)
        if holders is None or holders.pop(who, None) is None:
            return
        self.servers.subscribe_resource(key[0], key[1], False)
        if not holders:
            del self._subs[key]

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
        routed = route(self.servers, uri, steps, sight)
        if on and not self.servers.subscribable(routed.alias):
            raise rpc.RPCError(
                rpc.METHOD_NOT_FOUND,
                f"the server {routed.alias!r} does not offer resource subscriptions",
            )
        who = (id(owner), None)
        key = (routed.alias, routed.uri)
        if on:
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
        (a URI whose server was not found within ``steps`` is not)."""
        honoured: list[str] = []
        for uri in uris if isinstance(uris, list) else []:
            if not isinstance(uri, str):
                continue
            try:
                routed = route(self.servers, uri, steps, sight)
            except rpc.RPCError:
                continue
            if self.servers.subscribable(routed.alias):
                key = (routed.alias, routed.uri)
                self._hold(key, (id(conn), listen_id), (uri, send, listen_id))
                honoured.append(uri)
        return honoured

    def unlisten(self, conn: object, listen_id: rpc.Id) -> None:
        for key in list(self._subs):
            self._release(key, (id(conn), listen_id))

    def owner_gone(self, owner: object) -> None:
        for key in list(self._subs):
            for who in [w for w in self._subs.get(key, {}) if w[0] == id(owner)]:
                self._release(key, who)

    def _updated(self, alias: str, uri: str) -> None:
        for agent_uri, send, listen_id in list(self._subs.get((alias, uri), {}).values()):
            params: dict[str, Any] = {"uri": agent_uri}
            if listen_id is not None:
                params["_meta"] = {mcp.KEY_SUBSCRIPTION_ID: listen_id}
            send(rpc.encode_notification("notifications/resources/updated", params))
