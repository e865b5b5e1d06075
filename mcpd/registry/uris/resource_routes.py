"""The ``mcpd://`` scheme at work: which server a resource URI an agent sends goes to,
and in which form an agent is handed a server's URI.

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
(``registry.uris.scopes`` keeps the templates' forms per set of servers shown). What each
server lists is the resource table's (``resources``), which puts it here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from protocol.shown.logfields import log_extra

from .claims import REBUILD_STEPS, RESULT_STEPS, ROUTE_STEPS, Budget, Claim, Listings
from .routing import claimants
from .scheme import SCHEME, Ambiguous, Routed, Sight, Undecided, unwrap_mcpd_uri, wrap
from .scopes import MAX_SCOPES, Scope

logger = logging.getLogger("mcpd.registry")


class ResourceRoutes:
    """``version``: the resource table's, which each change of what agents are shown
    of its lists moves on; matching that runs out of steps is said once per version."""

    def __init__(self, version: Callable[[], int]) -> None:
        self._version = version
        self._lists = Listings()
        # Each server's URI templates, as agents are shown them, by alias.
        self._templates: dict[str, list[str]] = {}
        self._scopes: dict[frozenset[str], Scope] = {}  # by the servers agents see
        self._all = Scope(frozenset(), self._lists, {})  # every server's, always made
        self.match_steps = 0  # spent matching URIs against templates, ever
        # The version each kind of matching budget last ran out in, once logged.
        self._warned: dict[str, int] = {}

    # -- what the servers list --

    def put(
        self, alias: str, uris: Iterable[str], claims: list[Claim], templates: list[str]
    ) -> None:
        """What ``alias`` lists now: its URIs, and its templates (``claims``: those mcpd
        can match). The table's version has moved on for it already."""
        self._templates[alias] = templates
        spent, out = self._lists.put(alias, uris, claims)
        self.match_steps += spent
        self._rebuild()
        if out:
            self._over_budget("the URIs servers list", REBUILD_STEPS, alias)

    def remove(self, alias: str) -> None:
        del self._templates[alias]
        self._lists.remove(alias)
        self._rebuild()

    def _rebuild(self) -> None:
        """The lists changed: which templates are shown as the server wrote them is
        found again, for all servers now, for each other set of servers agents see
        when it is next needed."""
        self._scopes.clear()
        self._all = self._made(frozenset(self._templates))

    def scope(self, sight: Sight | None) -> Scope:
        """The scope of the servers ``sight`` shows (None: all of them)."""
        if sight is None:
            return self._all
        aliases = frozenset(a for a in self._templates if sight.has_server(a))
        if aliases == self._all.aliases:
            return self._all
        scope = self._scopes.get(aliases)
        if scope is None:
            if len(self._scopes) >= MAX_SCOPES:
                self._scopes.clear()
            scope = self._scopes[aliases] = self._made(aliases)
        return scope

    def _made(self, aliases: frozenset[str]) -> Scope:
        return Scope(aliases, self._lists, {a: self._templates[a] for a in aliases})

    def listers(self, uri: str, sight: Sight | None) -> list[str]:
        """The servers that list ``uri`` and show it to agents of ``sight`` (None:
        every server that lists it)."""
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
        return self._route(uri, budget, sight, lambda: self.scope(sight))

    def _route(
        self, uri: str, budget: Budget | None, sight: Sight | None, scoped: Callable[[], Scope]
    ) -> Routed | Ambiguous | Undecided | None:
        """``route``, with the sight's scope from ``scoped`` (asked only if needed)."""
        inner = unwrap_mcpd_uri(uri)
        if inner is not None:
            return Routed(*inner) if inner[0] in self._templates else None
        owners = self.listers(uri, sight)
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
        version = self._version()
        if self._warned.get(what) == version or not self._templates:
            return
        self._warned[what] = version
        if alias is None or alias not in self._templates:
            alias = max(self._templates, key=lambda a: len(self._templates[a]))
        logger.warning(
            "matching %s against the servers' resource templates took more than %d steps "
            "and was cut short (%s lists %d templates); what was not decided is handed to "
            "agents in the mcpd:// form, which reads back to its server",
            what,
            steps,
            alias,
            len(self._templates[alias]),
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
                found.append(self.scope(sight))
            return found[0]

        def to_agent(uri: str) -> str:
            if budget.out:
                return wrap(alias, uri)
            shown = self._to_agent(alias, uri, budget, sight, scoped)
            if budget.out:
                self._over_budget("the links of one result", RESULT_STEPS, alias)
            return shown

        return to_agent

    def agent_template(self, alias: str, template: str, sight: Sight | None = None) -> str:
        return self.scope(sight).agent_template(alias, template)

    def template_route(
        self, agent_template: str, sight: Sight | None = None
    ) -> tuple[str, str] | Ambiguous | None:
        """(alias, the server's template) for a template of a server ``sight`` shows:
        as its agents were shown it, in its ``mcpd://`` form, or as its server wrote it
        when only one server they see has it (else the ``mcpd://`` form of each).
        Nothing else names a template: no URI, no other spelling of one."""
        scope = self.scope(sight)
        found = scope.by_agent_template.get(agent_template)
        if found is not None:
            return found
        inner = unwrap_mcpd_uri(agent_template)
        if inner is not None:
            return inner if inner[0] in scope.by_template.get(inner[1], ()) else None
        owners = scope.by_template.get(agent_template, [])
        if sight is not None:
            owners = [a for a in owners if sight.admits_resource(a, agent_template)]
        if len(owners) > 1:
            return Ambiguous([wrap(a, agent_template) for a in owners])
        return (owners[0], agent_template) if owners else None


def _shown(found: list[str] | None, uri: str, sight: Sight | None) -> list[str] | None:
    """The servers of ``found`` whose ``uri`` agents of ``sight`` may read."""
    if found is None or sight is None:
        return found
    return [a for a in found if sight.admits_resource(a, uri)]
