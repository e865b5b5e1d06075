"""The aggregated resources and resource templates, and the URI scheme that routes
them back.

URIs belong to servers and can collide: two servers over two project folders both
list ``file:///README.md``. The rule, in one sentence: an agent is handed a URI as
the server wrote it exactly when reading that URI through mcpd reaches the same
server; otherwise it is handed ``mcpd://ALIAS/`` followed by the server's URI,
character for character. Reading a URI goes back the same way:

1. ``mcpd://ALIAS/REST`` goes to ALIAS as REST (always accepted, listed or not);
2. a URI one server lists goes to it; one several servers list is refused with an
   error naming each ``mcpd://`` form (never guessed);
3. a URI one server's template matches goes to it (templates of two servers that
   could match the same URI, or that match another server's listed URI, are both
   listed in the ``mcpd://`` form, so this never has two candidates; so is a template
   mcpd cannot match, which claims no URI);
4. anything else goes to the only server with resources, if there is just one.

The same function rewrites URIs in tool results, prompt messages and update
notifications, so whatever an agent is handed, it can read.

All of this is as the agent's profile (its ``Sight``) shows the servers: a server it
does not show lists nothing, claims nothing and is no candidate, for that agent, so
neither an error nor the form of a URI it is handed tells it of that server
(``registry.scopes`` keeps the templates' forms per set of servers shown).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Final

import msgspec
from msgspec import Raw

from protocol import surface
from protocol.logfields import log_extra

from .claims import (
    REBUILD_STEPS,
    RESULT_STEPS,
    ROUTE_STEPS,
    Budget,
    Claim,
    Listings,
    check_templates,
    parsed,
)
from .gate import Gate
from .limits import first_listed
from .routing import claimants
from .scheme import SCHEME, Ambiguous, Routed, Sight, Undecided, unwrap, wrap
from .scopes import MAX_SCOPES, Scope
from .shown import agent_resource, agent_template

_encode: Final = msgspec.json.Encoder().encode
logger = logging.getLogger("mcpd.registry")


class _Server:
    __slots__ = (
        "available",
        "claims",
        "held",
        "held_claims",
        "held_resources",
        "judged",
        "listed",
        "marker",
        "raw",
        "resources",
        "templates",
    )

    def __init__(
        self,
        alias: str,
        raw: tuple[list[surface.Resource], list[surface.ResourceTemplate]],
        gate: Gate,
    ) -> None:
        self.raw = raw  # as the server listed them
        # Cleaned, and held with a server held whole (why, by URI).
        self.listed = listed = gate.resources(alias, raw[0])
        self.resources = list(listed.shown.values())
        self.held_resources = listed.held
        self.judged = judged = gate.templates(alias, raw[1])
        self.templates = list(judged.shown.values())
        self.held = judged.held  # why each held template is, by its URI template
        # The templates parsed once: those mcpd can match, and the held ones (None:
        # one it cannot match, so it cannot tell what the template claims).
        shapes = (parsed(t.uriTemplate) for t in self.templates)
        self.claims = [Claim(alias, p) for p in shapes if p is not None]
        self.held_claims = [(parsed(t), why) for t, why in sorted(self.held.items())]
        self.available = True
        self.marker: str | None = None


class ResourceTable:
    def __init__(self, gate: Gate | None = None) -> None:
        self.gate = gate if gate is not None else Gate()
        self._servers: dict[str, _Server] = {}
        self._lists = Listings()
        self._scopes: dict[frozenset[str], Scope] = {}  # by the servers agents see
        self._all = Scope(frozenset(), self._lists, {})  # every server's, always made
        # Each resource and template as agents see it, encoded once per change, by
        # (alias, its place in the server's list, whether in the mcpd:// form).
        self._encoded: dict[tuple[str, int, bool], Raw] = {}
        self._encoded_templates: dict[tuple[str, int, bool], Raw] = {}
        self.version = 0
        self.match_steps = 0  # spent matching URIs against templates, ever
        # The version each kind of matching budget last ran out in, once logged.
        self._warned: dict[str, int] = {}

    # -- changes --

    def update(
        self,
        alias: str,
        resources: Sequence[surface.Resource],
        templates: Sequence[surface.ResourceTemplate],
    ) -> bool:
        # Of a URI or a URI template listed twice, the first listed, as with tools.
        listed = first_listed(resources, lambda r: r.uri)
        shapes = first_listed(templates, lambda t: t.uriTemplate)
        old = self._servers.get(alias)
        if (
            old is not None
            and _encode(old.raw[0]) == _encode(listed)
            and _encode(old.raw[1]) == _encode(shapes)
        ):
            return False
        check_templates(alias, shapes)
        self._install(alias, (listed, shapes))
        return True

    def rejudge(self, alias: str) -> bool:
        """The server's lists through the gate again (pins or settings changed);
        whether what agents see of them changed."""
        old = self._servers.get(alias)
        if old is None:
            return False
        templates = self.gate.templates(alias, old.raw[1])
        resources = self.gate.resources(alias, old.raw[0])
        if templates.same_as(old.judged) and resources.same_as(old.listed):
            return False
        self._install(alias, old.raw)
        return True

    def _install(
        self, alias: str, raw: tuple[list[surface.Resource], list[surface.ResourceTemplate]]
    ) -> None:
        old = self._servers.get(alias)
        server = _Server(alias, raw, self.gate)
        if old is not None:
            server.available, server.marker = old.available, old.marker
        self._servers[alias] = server
        spent, out = self._lists.put(alias, (r.uri for r in server.resources), server.claims)
        self.match_steps += spent
        self._rebuild()
        if out:
            self._over_budget("the URIs servers list", REBUILD_STEPS, alias)

    def remove(self, alias: str) -> bool:
        if self._servers.pop(alias, None) is None:
            return False
        self._lists.remove(alias)
        self._rebuild()
        return True

    def set_availability(self, alias: str, available: bool, marker: str | None = None) -> bool:
        server = self._servers.get(alias)
        if server is None or (server.available, server.marker) == (available, marker):
            return False
        server.available, server.marker = available, marker
        self._changed()
        return True

    def _rebuild(self) -> None:
        """The lists changed: which templates are shown as the server wrote them is
        found again, for all servers now, for each other set of servers agents see
        when it is next needed."""
        self._scopes.clear()
        self._all = self._made(frozenset(self._servers))
        self._changed()

    def _changed(self) -> None:
        self._encoded.clear()
        self._encoded_templates.clear()
        self.version += 1

    def _scope(self, sight: Sight | None) -> Scope:
        """The scope of the servers ``sight`` shows (None: all of them)."""
        if sight is None:
            return self._all
        aliases = frozenset(a for a in self._servers if sight.has_server(a))
        if aliases == self._all.aliases:
            return self._all
        scope = self._scopes.get(aliases)
        if scope is None:
            if len(self._scopes) >= MAX_SCOPES:
                self._scopes.clear()
            scope = self._scopes[aliases] = self._made(aliases)
        return scope

    def _made(self, aliases: frozenset[str]) -> Scope:
        templates = {a: [t.uriTemplate for t in self._servers[a].templates] for a in aliases}
        return Scope(aliases, self._lists, templates)

    def _listers(self, uri: str, sight: Sight | None) -> list[str]:
        """The servers that list ``uri`` and show it to agents of ``sight``."""
        owners = self._lists.listers.get(uri, [])
        if sight is None or not owners:
            return owners
        return [a for a in owners if sight.admits_resource(a, uri)]

    # -- the scheme --

    def route(
        self, uri: str, budget: Budget | None = None, sight: Sight | None = None
    ) -> Routed | Ambiguous | Undecided | None:
        """Which server an agent's URI goes to, and as what (None: no server's), among
        the servers ``sight`` shows (None: all). What matching costs comes out of
        ``budget`` (at most a URI's share of it). The ``mcpd://`` form names its server
        whoever sees it: the caller checks the sight."""
        return self._route(uri, budget, sight, lambda: self._scope(sight))

    def _route(
        self, uri: str, budget: Budget | None, sight: Sight | None, scoped: Callable[[], Scope]
    ) -> Routed | Ambiguous | Undecided | None:
        """``route``, with the sight's scope from ``scoped`` (asked only if needed)."""
        inner = unwrap(uri)
        if inner is not None:
            return Routed(*inner) if inner[0] in self._servers else None
        owners = self._listers(uri, sight)
        if owners:
            if len(owners) == 1:
                return Routed(owners[0], uri)
            return Ambiguous([wrap(a, uri) for a in owners])
        scope = scoped()
        if len(scope.aliases) == 1:
            # Whatever its templates say, a URI no other server lists goes to it.
            return Routed(next(iter(scope.aliases)), uri)
        whole = budget if budget is not None else Budget(ROUTE_STEPS)
        mine = whole.part(ROUTE_STEPS)
        own = mine.left == ROUTE_STEPS  # else the caller's budget was the shorter
        matched = _shown(claimants(scope.plain, uri, mine), uri, sight)
        if matched == []:
            # A template two servers share is shown in its mcpd:// forms, but an agent
            # may expand the server's own (a tool's text names it): say which to read.
            matched = _shown(claimants(scope.wrapped, uri, mine), uri, sight)
        whole.settle(mine)
        self.match_steps += mine.spent
        if matched is None:
            if own:
                self._over_budget("a URI", ROUTE_STEPS)
            return Undecided(mine.spent)
        if len(matched) == 1:
            return Routed(matched[0], uri)
        if len(matched) > 1:
            return Ambiguous([wrap(a, uri) for a in matched])
        return None

    def _over_budget(self, what: str, steps: int, alias: str | None = None) -> None:
        """Say once per change of the lists and kind of budget that matching ran out
        of steps, naming the server it was for, or else the one with the most
        templates (the likeliest cause)."""
        if self._warned.get(what) == self.version or not self._servers:
            return
        self._warned[what] = self.version
        if alias is None or alias not in self._servers:
            alias = max(self._servers, key=lambda a: len(self._servers[a].templates))
        logger.warning(
            "matching %s against the servers' resource templates took more than %d steps "
            "and was cut short (%s lists %d templates); what was not decided is handed to "
            "agents in the mcpd:// form, which reads back to its server",
            what,
            steps,
            alias,
            len(self._servers[alias].templates),
            extra=log_extra(alias, "resource_template", "template matching over budget"),
        )

    def _to_agent(
        self,
        alias: str,
        uri: str,
        budget: Budget | None,
        sight: Sight | None,
        scoped: Callable[[], Scope],
    ) -> str:
        if uri.startswith(SCHEME) or (budget is not None and not budget.spend(1)):
            return wrap(alias, uri)
        routed = self._route(uri, budget, sight, scoped)
        if isinstance(routed, Routed) and routed.alias == alias:
            return uri
        return wrap(alias, uri)

    def links(self, alias: str, sight: Sight | None = None) -> Callable[[str], str]:
        """What hands an agent of ``sight`` the URIs of one result of ``alias`` (a tool
        result, a prompt, a read), its matching all drawn from one budget."""
        budget = Budget(RESULT_STEPS)
        found: list[Scope] = []  # the sight's scope, found for the first link that needs it

        def scoped() -> Scope:
            if not found:
                found.append(self._scope(sight))
            return found[0]

        def to_agent(uri: str) -> str:
            if budget.out:
                return wrap(alias, uri)
            shown = self._to_agent(alias, uri, budget, sight, scoped)
            if budget.out:
                self._over_budget("the links of one result", RESULT_STEPS, alias)
            return shown

        return to_agent

    def held_for(self, alias: str, uri: str, budget: Budget | None = None) -> str | None:
        """Why reading (or subscribing to) ``uri`` of ``alias`` is refused: the server
        is held whole, or ``uri`` is not a resource it lists and a template of its that
        is held matches it (None: it is not refused)."""
        server = self._servers.get(alias)
        if server is None:
            return None
        all_held = self.gate.held_whole(alias)
        if all_held is not None:
            return all_held
        if not server.held_claims or alias in self._lists.listers.get(uri, ()):
            return None
        whole = budget if budget is not None else Budget(ROUTE_STEPS)
        mine = whole.part(ROUTE_STEPS)
        try:
            for template, why in server.held_claims:
                # Matched, or mcpd cannot tell (a template it cannot parse, a budget
                # spent): refused either way.
                if template is None or mine.matches(template, uri) is not False:
                    return why
            return None
        finally:
            whole.settle(mine)
            self.match_steps += mine.spent

    def held_template(self, alias: str, template: str) -> str | None:
        """Why a completion for ``template`` of ``alias`` (the server's URI template)
        is refused: the template, or its whole server, is held (None: it is not)."""
        server = self._servers.get(alias)
        if server is None:
            return None
        return self.gate.held_whole(alias) or server.held.get(template)

    def agent_template(self, alias: str, template: str, sight: Sight | None = None) -> str:
        return self._scope(sight).agent_template(alias, template)

    def template_route(
        self, agent_template: str, sight: Sight | None = None
    ) -> tuple[str, str] | None:
        """(alias, the server's template) for a template as agents of ``sight`` were
        shown it."""
        found = self._scope(sight).by_agent_template.get(agent_template)
        if found is not None:
            return found
        inner = unwrap(agent_template)
        return inner if inner is not None and inner[0] in self._servers else None

    # -- queries --

    def listing(self, sight: Sight | None = None) -> list[Raw]:
        """The resources agents of ``sight`` see, each plain exactly when its server is
        the only one they see list it."""
        out = []
        for a in sorted(self._servers):
            for i, r in enumerate(self._servers[a].resources):
                if sight is not None and not sight.admits_resource(a, r.uri):
                    continue
                wrapped = r.uri.startswith(SCHEME) or self._listers(r.uri, sight) != [a]
                key = (a, i, wrapped)
                raw = self._encoded.get(key)
                if raw is None:
                    uri = wrap(a, r.uri) if wrapped else r.uri
                    server = self._servers[a]
                    held = server.held_resources.get(r.uri)
                    shown = agent_resource(a, r, uri, server.available, server.marker, held)
                    raw = self._encoded[key] = Raw(_encode(shown))
                out.append(raw)
        return out

    def template_listing(self, sight: Sight | None = None) -> list[Raw]:
        scope = self._scope(sight)
        out = []
        for a in sorted(scope.aliases):
            for i, r in enumerate(self._servers[a].templates):
                if sight is not None and not sight.admits_resource(a, r.uriTemplate):
                    continue
                wrapped = (a, r.uriTemplate) in scope.shown_wrapped
                key = (a, i, wrapped)
                raw = self._encoded_templates.get(key)
                if raw is None:
                    server = self._servers[a]
                    shown = agent_template(
                        a,
                        r,
                        wrap(a, r.uriTemplate) if wrapped else r.uriTemplate,
                        server.available,
                        server.marker,
                        server.held.get(r.uriTemplate),
                    )
                    raw = self._encoded_templates[key] = Raw(_encode(shown))
                out.append(raw)
        return out

    def count(self, alias: str) -> tuple[int, int]:
        server = self._servers.get(alias)
        return (len(server.resources), len(server.templates)) if server else (0, 0)

    def known(self, alias: str) -> bool:
        return alias in self._servers

    def raw(
        self, alias: str
    ) -> tuple[list[surface.Resource], list[surface.ResourceTemplate]] | None:
        """The server's resources and templates as it listed them; None if never."""
        server = self._servers.get(alias)
        return (list(server.raw[0]), list(server.raw[1])) if server else None


def _shown(found: list[str] | None, uri: str, sight: Sight | None) -> list[str] | None:
    """The servers of ``found`` whose ``uri`` agents of ``sight`` may read."""
    if found is None or sight is None:
        return found
    return [a for a in found if sight.admits_resource(a, uri)]
