"""Resource subscriptions, held per agent: a legacy agent's ``resources/subscribe``,
or the ``resourceSubscriptions`` of a modern agent's ``subscriptions/listen``.

Upstream each URI is subscribed once, whatever the number of agents; an update reaches
exactly the agents subscribed to it, under the URI each subscribed with. A connection
holds at most ``MAX_SUBSCRIPTIONS``, of at most ``MAX_SUBSCRIBED_BYTES`` of URIs, and all
agents together at most ``MAX_SUBSCRIPTIONS_IN_ALL`` of ``subscribed_bytes_in_all``,
shared out by user as the places are (``entry.shares``): one user other than mcpd's own
and root may hold its share of those, so that another user let in on a profile's socket
cannot take them all, and mcpd's own user and root a reserve past them. A subscription
past one of them is refused with an error naming it. A connection's own are found
without looking through the others' when it ends.

A subscription is the agent's only while its profile routes the URI it named to the
server it was made at: an update is told to it only then, and when its profile changes
(a reload, its ``mcpd/useProfile``) one whose URI now goes elsewhere, or to a server the
profile no longer shows, is let go of, upstream too when no one else holds it, and the
agent is told nothing of it (it would name what the agent may no longer see).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from typing import Any, Final, NoReturn

import msgspec

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.uri_templates import MAX_URI

from ...config.tables.model import DaemonConfig
from ...registry.uris.claims import ROUTE_STEPS, Budget
from ...registry.uris.scheme import Routed, Sight, Undecided
from ...servers.all_servers import AllServers
from ...servers.shared import AgentKey, Whose
from ..beyond_tools.prompts import held_read_error
from ..beyond_tools.resources import route
from ..entry.shares import ByteShares, Holdings, count_shares, shares_within
from .logs import Send

# Each subscription is held here and at its server, and costs its server a request to
# take and another to let go: without a bound one agent naming URIs without end would
# grow mcpd, slow every agent's turn, and keep the server busy long after it left.
# Far more than an agent watching the resources it works with needs.
MAX_SUBSCRIPTIONS: Final = 1_000
# Their URIs' bytes (as JSON) too. A server hears every URI it is subscribed to in the
# one listen mcpd holds there, sent again as they change, and may echo them all back:
# many agents holding long URIs would make that a line no server (nor mcpd reading its
# echo) takes. So are all agents' together, and those never past a quarter of
# ``daemon.max_line_bytes``: the listen and an echo writing each character escaped fit.
MAX_SUBSCRIBED_BYTES: Final = 128 * 1024
MAX_SUBSCRIPTIONS_IN_ALL: Final = 10_000
MAX_SUBSCRIBED_BYTES_IN_ALL: Final = 1024 * 1024
_encode: Final = msgspec.json.Encoder().encode


def subscribed_bytes_in_all(max_line_bytes: int) -> int:
    """What all agents' subscribed URIs may come to, in bytes, with lines of at most
    ``max_line_bytes``."""
    return min(MAX_SUBSCRIBED_BYTES_IN_ALL, max_line_bytes // 4)


def _size(uri: str) -> int:
    return len(_encode(uri))


class _Entry:
    """One agent's subscription to a server's URI: the URI as the agent named it,
    where its updates go, the listen it came with (None: ``resources/subscribe``), the
    profile it routes through, and whether that routes it here still, as last found
    (with the version of the servers' lists it was found at)."""

    __slots__ = ("checked", "listen_id", "send", "sight", "uri")

    def __init__(self, uri: str, send: Send, listen_id: rpc.Id | None, sight: Sight | None) -> None:
        self.uri = uri
        self.send = send
        self.listen_id = listen_id
        self.sight = sight
        self.checked: tuple[int, bool] | None = None


SubscriptionKey = tuple[str, str]  # (alias, the server's URI)
# Whose a subscription is: the id of its ``AgentKey`` (the agent's, or its listens' over
# HTTP: ``Agent.listen_owner``) and the listen's id (None: the agent's own resources/subscribe).
Subscriber = tuple[int, rpc.Id | None]


def _refuse(message: str, limit: int, held: int, asked: int) -> NoReturn:
    raise rpc.RPCError(rpc.INVALID_PARAMS, message, {"limit": limit, "held": held, "asked": asked})


def _refuse_in_all(shares: ByteShares, now: int, asked: int, what: str, own: bool) -> NoReturn:
    why = (
        f"they hold {now} and this asks for {asked} more: let some of this"
        " connection's go, or try again later"
    )
    bound = shares.most + shares.reserve
    whose = f"all agents together may hold at most {bound} {what}"
    if not own:
        whose += f", {shares.reserve} of them kept for mcpd's own user and root"
    _refuse(f"{whose}; {why}", bound if own else shares.most, now, asked)


class Subscriptions:
    def __init__(
        self, servers: AllServers, settings: Callable[[], DaemonConfig] = DaemonConfig
    ) -> None:
        self.servers = servers
        self._settings = settings  # the daemon's, as they are now
        # (alias, the server's URI) -> {subscriber: its subscription}
        self._subs: dict[SubscriptionKey, dict[Subscriber, _Entry]] = {}
        # id of the owner -> what it holds: (alias, the server's URI), listen id
        self._owned: dict[int, set[tuple[SubscriptionKey, rpc.Id | None]]] = {}
        # id of the owner -> the bytes of the agent's URIs it holds (a server's URI is
        # the agent's or the end of it)
        self._owned_bytes: dict[int, int] = {}
        # What each user, and each of its owners (by id), holds in all: subscriptions
        # and the bytes of their URIs.
        self._counted: Holdings[int] = Holdings()
        self._sized: Holdings[int] = Holdings()
        servers.on_resource_updated(self._updated)

    def _hold(self, key: SubscriptionKey, who: Subscriber, entry: _Entry, uid: int | None) -> None:
        holders = self._subs.setdefault(key, {})
        before = holders.get(who)
        if before is None:
            self.servers.subscribe_resource(key[0], key[1], True)
            self._owned.setdefault(who[0], set()).add((key, who[1]))
            self._counted.take(uid, who[0], 1)
        holders[who] = entry
        grown = _size(entry.uri) - (0 if before is None else _size(before.uri))
        if grown > 0:
            self._sized.take(uid, who[0], grown)
        elif grown < 0:
            self._sized.give(who[0], -grown)
        self._owned_bytes[who[0]] = self._owned_bytes.get(who[0], 0) + grown

    def _release(self, key: SubscriptionKey, who: Subscriber) -> None:
        holders = self._subs.get(key)
        entry = None if holders is None else holders.pop(who, None)
        if holders is None or entry is None:
            return
        self.servers.subscribe_resource(key[0], key[1], False)
        if not holders:
            del self._subs[key]
        self._counted.give(who[0], 1)
        self._sized.give(who[0], _size(entry.uri))
        self._owned_bytes[who[0]] -= _size(entry.uri)
        owned = self._owned[who[0]]
        owned.discard((key, who[1]))
        if not owned:
            del self._owned[who[0]]
            del self._owned_bytes[who[0]]

    def _room_for(self, owner: AgentKey, more: int, size: int, whose: Whose | None) -> None:
        """Refuses ``more`` subscriptions of ``size`` bytes that would take the
        connection, its user (``whose``; None: mcpd's own), or all agents together,
        past a bound, naming it."""
        counted, sized = "resource subscriptions", "bytes of subscribed URIs"
        holds = len(self._owned.get(id(owner), ()))
        held = self._owned_bytes.get(id(owner), 0)
        for limit, now, asked, what in (
            (MAX_SUBSCRIPTIONS, holds, more, counted),
            (MAX_SUBSCRIBED_BYTES, held, size, sized),
        ):
            if now + asked > limit:
                why = f"this one holds {now} and asks for {asked} more: let some go first"
                _refuse(f"a connection may hold at most {limit} {what}; {why}", limit, now, asked)
        settings = self._settings()
        in_all = subscribed_bytes_in_all(settings.max_line_bytes)
        uid, own = _uid(whose), whose is None or whose.own
        for of_all, held_in_all, asked, what in (
            (count_shares(settings, MAX_SUBSCRIPTIONS_IN_ALL), self._counted, more, counted),
            (count_shares(settings, in_all), self._sized, size, sized),
        ):
            shares = shares_within(of_all)
            passed = held_in_all.passed(shares, uid, own, asked)
            if passed == "share":
                now, limit = held_in_all.of(uid), shares.per_uid
                user = "the user mcpd cannot name" if uid is None else f"uid {uid}"
                _refuse(
                    f"{user} may hold at most {limit} {what} of all agents' (its part as "
                    f"daemon.max_connections_per_uid is of max_connections); it holds {now} "
                    f"and this asks for {asked} more: let some go first",
                    limit,
                    now,
                    asked,
                )
            if passed == "all":
                _refuse_in_all(shares, held_in_all.total, asked, what, own)

    # -- legacy: resources/subscribe, resources/unsubscribe --

    def subscribe(
        self,
        owner: AgentKey,
        uri: str,
        send: Send,
        on: bool,
        steps: Budget,
        sight: Sight | None = None,
        whose: Whose | None = None,
    ) -> None:
        """``whose``: the user of ``owner``'s agent, as its share of what all agents
        hold goes (None: mcpd's own)."""
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
        hold = self.servers.held_uri(routed.alias, routed.uri, steps) if on else None
        if hold is not None:
            raise held_read_error(uri, routed.alias, routed.uri, hold)
        who = (id(owner), None)
        key = (routed.alias, routed.uri)
        if on:
            before = self._subs.get(key, {}).get(who)
            if before is None:
                self._room_for(owner, 1, _size(uri), whose)
            else:  # held already, maybe under another of its names
                self._room_for(owner, 0, max(0, _size(uri) - _size(before.uri)), whose)
            self._hold(key, who, _Entry(uri, send, None, sight), _uid(whose))
        else:
            self._release(key, who)

    # -- modern: a listen's resourceSubscriptions --

    def listen(
        self,
        owner: AgentKey,
        listen_id: rpc.Id,
        uris: object,
        send: Send,
        steps: Budget,
        sight: Sight | None = None,
        whose: Whose | None = None,
    ) -> list[str]:
        """Hold the URIs a listen names; the subset honoured, for its acknowledgement
        (a URI whose server was not found within ``steps`` is not). Refused whole when
        the URIs it names would take the connection, its user (``whose``; None:
        mcpd's own), or all agents, past a bound."""
        named = uris if isinstance(uris, list) else []
        size = sum(_size(uri) for uri in named if isinstance(uri, str) and len(uri) <= MAX_URI)
        self._room_for(owner, sum(isinstance(uri, str) for uri in named), size, whose)
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
                entry = _Entry(uri, send, listen_id, sight)
                self._hold(key, (id(owner), listen_id), entry, _uid(whose))
                honoured.append(uri)
        return honoured

    def unlisten(self, owner: AgentKey, listen_id: rpc.Id) -> None:
        owned = self._owned.get(id(owner), set())
        for key in [key for key, held_by in owned if held_by == listen_id]:
            self._release(key, (id(owner), listen_id))

    def owner_gone(self, owner: AgentKey) -> None:
        for key, listen_id in list(self._owned.get(id(owner), ())):
            self._release(key, (id(owner), listen_id))

    # -- profiles changing --

    def reconfigured(self, changed: Collection[Sight]) -> None:
        """The profiles ``changed`` were configured anew (a reload): their agents'
        subscriptions are routed again, and let go of where they no longer reach their
        server."""
        ids = {id(sight) for sight in changed}
        for key, holders in list(self._subs.items()):
            for who, entry in list(holders.items()):
                if id(entry.sight) in ids:
                    self._look_again(key, who, entry)

    def switched(self, owner: AgentKey, sight: Sight | None) -> None:
        """``owner``'s agent sees the profile ``sight`` from now on (``mcpd/useProfile``):
        its subscriptions route through it, those that no longer reach their server let
        go of."""
        for key, listen_id in list(self._owned.get(id(owner), ())):
            who = (id(owner), listen_id)
            entry = self._subs[key][who]
            entry.sight = sight
            self._look_again(key, who, entry)

    def _look_again(self, key: SubscriptionKey, who: Subscriber, entry: _Entry) -> None:
        """Lets go of ``entry`` unless its URI may still reach ``key``: routed there,
        or its server shown and the URI not found (its lists may be on their way back
        after a restart), or matching it cut short."""
        entry.checked = None
        sight = entry.sight
        found = self.servers.route_uri(entry.uri, Budget(ROUTE_STEPS), sight)
        shown = sight is None or sight.admits_resource(*key)
        if shown and (found is None or isinstance(found, Undecided) or self._routes(found, key)):
            return
        self._release(key, who)

    @staticmethod
    def _routes(found: object, key: SubscriptionKey) -> bool:
        return isinstance(found, Routed) and (found.alias, found.uri) == key

    def _reaches(self, entry: _Entry, key: SubscriptionKey, version: int) -> bool:
        """Whether ``entry``'s URI routes to ``key`` through its profile now; found once
        per version of the servers' lists (and again after its profile changed)."""
        if entry.checked is not None and entry.checked[0] == version:
            return entry.checked[1]
        sight = entry.sight
        found = self.servers.route_uri(entry.uri, Budget(ROUTE_STEPS), sight)
        reaches = self._routes(found, key) and (sight is None or sight.admits_resource(*key))
        entry.checked = (version, reaches)
        return reaches

    def _updated(self, alias: str, uri: str) -> None:
        key = (alias, uri)
        version = self.servers.prompt_resource_versions[1]
        for entry in list(self._subs.get(key, {}).values()):
            if not self._reaches(entry, key, version):
                continue
            params: dict[str, Any] = {"uri": entry.uri}
            if entry.listen_id is not None:
                params["_meta"] = {mcp.KEY_SUBSCRIPTION_ID: entry.listen_id}
            entry.send(rpc.encode_notification("notifications/resources/updated", params))


def _uid(whose: Whose | None) -> int | None:
    """The user a subscription is counted under (mcpd's own, for None)."""
    return os.getuid() if whose is None else whose.uid
