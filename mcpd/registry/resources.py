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
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

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
from .routing import PrefixIndex, claimants
from .scheme import SCHEME, Ambiguous, Routed, Undecided, unwrap, wrap
from .shown import marked

_encode: Final = msgspec.json.Encoder().encode
logger = logging.getLogger("mcpd.registry")

Filter = Callable[[str, str], bool]  # (alias, the server's own URI or template)


class _Server:
    __slots__ = (
        "available",
        "claims",
        "held",
        "held_claims",
        "judged",
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
        self.resources = gate.resources(alias, raw[0])  # cleaned
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
        self._plain = PrefixIndex(())
        self._wrapped = PrefixIndex(())  # those that can match
        self._shown_wrapped: set[tuple[str, str]] = set()  # all in the mcpd:// form
        self._by_agent_template: dict[str, tuple[str, str]] = {}
        self._listing: list[tuple[str, str, Raw]] | None = None
        self._template_listing: list[tuple[str, str, Raw]] | None = None
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
        old = self._servers.get(alias)
        if (
            old is not None
            and _encode(old.raw[0]) == _encode(list(resources))
            and _encode(old.raw[1]) == _encode(list(templates))
        ):
            return False
        check_templates(alias, templates)
        self._install(alias, (list(resources), list(templates)))
        return True

    def rejudge(self, alias: str) -> bool:
        """The server's templates through the gate again (pins or settings changed);
        whether what agents see of them changed (its resources are not pinned)."""
        old = self._servers.get(alias)
        if old is None or self.gate.templates(alias, old.raw[1]).same_as(old.judged):
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
        """Which templates are shown as the server wrote them, from the claims kept per
        pair of servers (no matching: that was done for the pairs that changed)."""
        every = [
            (a, t.uriTemplate) for a in sorted(self._servers) for t in self._servers[a].templates
        ]
        # A template mcpd cannot match claims no URI: it clashes with none, and it is
        # shown in the mcpd:// form, the only one that reads come back through. Past
        # the budget a template counts as clashing: its mcpd:// form still works.
        claims, clash = self._lists.clashing()
        plain = [
            c
            for i, c in enumerate(claims)
            if i not in clash and not c.template.text.startswith(SCHEME)
        ]
        shown_plain = {(c.alias, c.template.text) for c in plain}
        self._plain = PrefixIndex(plain)
        self._wrapped = PrefixIndex(
            c for c in claims if (c.alias, c.template.text) not in shown_plain
        )
        self._shown_wrapped = set(every) - shown_plain
        self._by_agent_template = {self.agent_template(a, t): (a, t) for a, t in every}
        self._changed()

    def _changed(self) -> None:
        self._listing = None
        self._template_listing = None
        self.version += 1

    # -- the scheme --

    def route(
        self, uri: str, budget: Budget | None = None
    ) -> Routed | Ambiguous | Undecided | None:
        """Which server an agent's URI goes to, and as what (None: no server's). What
        matching costs comes out of ``budget`` (at most a URI's share of it)."""
        inner = unwrap(uri)
        if inner is not None:
            return Routed(*inner) if inner[0] in self._servers else None
        owners = self._lists.listers.get(uri)
        if owners:
            if len(owners) == 1:
                return Routed(owners[0], uri)
            return Ambiguous([wrap(a, uri) for a in owners])
        if len(self._servers) == 1:
            # Whatever its templates say, a URI no other server lists goes to it.
            return Routed(next(iter(self._servers)), uri)
        whole = budget if budget is not None else Budget(ROUTE_STEPS)
        mine = whole.part(ROUTE_STEPS)
        own = mine.left == ROUTE_STEPS  # else the caller's budget was the shorter
        matched = claimants(self._plain, uri, mine)
        if matched == []:
            # A template two servers share is shown in its mcpd:// forms, but an agent
            # may expand the server's own (a tool's text names it): say which to read.
            matched = claimants(self._wrapped, uri, mine)
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

    def to_agent(self, alias: str, uri: str, budget: Budget | None = None) -> str:
        """The URI an agent is handed for ``alias``'s ``uri``: reading it comes back.
        Once ``budget`` is spent, the ``mcpd://`` form, without matching."""
        if uri.startswith(SCHEME) or (budget is not None and not budget.spend(1)):
            return wrap(alias, uri)
        routed = self.route(uri, budget)
        if isinstance(routed, Routed) and routed.alias == alias:
            return uri
        return wrap(alias, uri)

    def links(self, alias: str) -> Callable[[str], str]:
        """What hands over the URIs of one result of ``alias`` (a tool result, a prompt,
        a read), its matching all drawn from one budget."""
        budget = Budget(RESULT_STEPS)

        def to_agent(uri: str) -> str:
            if budget.out:
                return wrap(alias, uri)
            shown = self.to_agent(alias, uri, budget)
            if budget.out:
                self._over_budget("the links of one result", RESULT_STEPS, alias)
            return shown

        return to_agent

    def held_for(self, alias: str, uri: str, budget: Budget | None = None) -> str | None:
        """Why reading ``uri`` of ``alias`` is refused: it is not a resource the server
        lists, and a template of its that is held matches it (None: it is not)."""
        server = self._servers.get(alias)
        if server is None or not server.held_claims or alias in self._lists.listers.get(uri, ()):
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

    def agent_template(self, alias: str, template: str) -> str:
        return wrap(alias, template) if (alias, template) in self._shown_wrapped else template

    def template_route(self, agent_template: str) -> tuple[str, str] | None:
        """(alias, the server's template) for a template as agents were shown it."""
        found = self._by_agent_template.get(agent_template)
        if found is not None:
            return found
        inner = unwrap(agent_template)
        return inner if inner is not None and inner[0] in self._servers else None

    # -- queries --

    def listing(self, keep: Filter | None = None) -> list[Raw]:
        if self._listing is None:
            self._listing = [
                (a, r.uri, Raw(_encode(self._agent_resource(a, r, self.to_agent(a, r.uri)))))
                for a in sorted(self._servers)
                for r in self._servers[a].resources
            ]
        return [raw for a, uri, raw in self._listing if keep is None or keep(a, uri)]

    def template_listing(self, keep: Filter | None = None) -> list[Raw]:
        if self._template_listing is None:
            self._template_listing = [
                (
                    a,
                    r.uriTemplate,
                    Raw(_encode(self._agent_template(a, r, self.agent_template(a, r.uriTemplate)))),
                )
                for a in sorted(self._servers)
                for r in self._servers[a].templates
            ]
        return [raw for a, t, raw in self._template_listing if keep is None or keep(a, t)]

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

    def _note(self, alias: str, description: Any, held: str | None = None) -> str:
        server = self._servers[alias]
        note = f"[{alias}] {description if isinstance(description, str) else ''}".rstrip()
        marker = f"held: {held}" if held is not None else server.marker
        return f"[{marker}] {note}" if marker else note

    def _meta(
        self, alias: str, own: Any, original: str, shown: str, key: str, held: str | None = None
    ) -> dict[str, Any]:
        meta: dict[str, Any] = (
            {k: v for k, v in own.items() if not k.startswith("mcpd/")}
            if isinstance(own, dict)
            else {}
        )
        meta["mcpd/server"] = alias
        if shown != original:
            meta[key] = original
        meta["mcpd/available"] = self._servers[alias].available and held is None
        if held is not None:
            meta["mcpd/held"] = held
        return meta

    def _agent_resource(self, alias: str, r: surface.Resource, uri: str) -> surface.Resource:
        return msgspec.structs.replace(
            r,
            uri=uri,
            title=marked(alias, r.title),
            description=self._note(alias, r.description),
            meta=self._meta(alias, r.meta, r.uri, uri, "mcpd/originalUri"),
        )

    def _agent_template(
        self, alias: str, r: surface.ResourceTemplate, template: str
    ) -> surface.ResourceTemplate:
        held = self._servers[alias].held.get(r.uriTemplate)
        return msgspec.structs.replace(
            r,
            uriTemplate=template,
            title=marked(alias, r.title),
            description=self._note(alias, r.description, held),
            meta=self._meta(
                alias, r.meta, r.uriTemplate, template, "mcpd/originalUriTemplate", held
            ),
        )
