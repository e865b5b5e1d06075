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
from protocol import uritemplate as tpl
from protocol.logfields import log_extra

from ..config.model import ALIAS_RE
from .claims import REBUILD_STEPS, ROUTE_STEPS, Budget, Listed, overlapping
from .gate import Gate
from .shown import marked

SCHEME: Final = "mcpd://"
_encode: Final = msgspec.json.Encoder().encode
logger = logging.getLogger("mcpd.registry")

Filter = Callable[[str, str], bool]  # (alias, the server's own URI or template)


def wrap(alias: str, uri: str) -> str:
    return f"{SCHEME}{alias}/{uri}"


def unwrap(uri: str) -> tuple[str, str] | None:
    """``(alias, the server's URI)`` for an ``mcpd://`` URI, else None."""
    if not uri.startswith(SCHEME):
        return None
    alias, sep, rest = uri[len(SCHEME) :].partition("/")
    if not sep or not ALIAS_RE.match(alias):
        return None
    return alias, rest


class Routed(msgspec.Struct, frozen=True):
    alias: str
    uri: str  # as the server knows it


class Ambiguous(msgspec.Struct, frozen=True):
    candidates: list[str]  # the mcpd:// form of each server's URI


class _Server:
    __slots__ = ("available", "held", "judged", "marker", "raw", "resources", "templates")

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
        self.available = True
        self.marker: str | None = None


def _unmatchable(template: str) -> str | None:
    """Why mcpd cannot match URIs against ``template``; None when it can."""
    try:
        tpl.parse(template)
    except tpl.TemplateError as exc:
        return str(exc)
    return None


def _check_templates(alias: str, templates: Sequence[surface.ResourceTemplate]) -> None:
    """Say which of a server's templates mcpd cannot match (once per list it sends)."""
    errors = [e for e in map(_unmatchable, (t.uriTemplate for t in templates)) if e]
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        logger.warning(
            "%s: resource template shown only in the mcpd:// form, mcpd cannot match it: %s%s",
            alias,
            errors[0],
            more,
            extra=log_extra(alias, "resource_template", errors[0]),
        )


def _matching(templates: list[tuple[str, str]], uri: str, budget: Budget) -> list[str] | None:
    """The servers whose templates match ``uri``, sorted; None once the budget is spent."""
    found: set[str] = set()
    for alias, template in templates:
        if alias in found or not uri.startswith(tpl.literal_prefix(template)):
            continue
        matched = budget.matches(template, uri)
        if matched is None:
            return None
        if matched:
            found.add(alias)
    return sorted(found)


class ResourceTable:
    def __init__(self, gate: Gate | None = None) -> None:
        self.gate = gate if gate is not None else Gate()
        self._servers: dict[str, _Server] = {}
        self._listers: dict[str, list[str]] = {}
        self._plain_templates: list[tuple[str, str]] = []
        self._wrapped_templates: list[tuple[str, str]] = []  # those that can match
        self._shown_wrapped: set[tuple[str, str]] = set()  # all in the mcpd:// form
        self._by_agent_template: dict[str, tuple[str, str]] = {}
        self._listing: list[tuple[str, str, Raw]] | None = None
        self._template_listing: list[tuple[str, str, Raw]] | None = None
        self.version = 0
        self.match_steps = 0  # spent matching URIs against templates, ever
        self._warned = -1  # the version whose matching budget ran out, once logged

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
        _check_templates(alias, templates)
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
        self._rebuild()

    def remove(self, alias: str) -> bool:
        if self._servers.pop(alias, None) is None:
            return False
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
        listers: dict[str, list[str]] = {}
        for alias in sorted(self._servers):
            for r in self._servers[alias].resources:
                owners = listers.setdefault(r.uri, [])
                if alias not in owners:
                    owners.append(alias)
        self._listers = listers
        every = [
            (a, t.uriTemplate) for a in sorted(self._servers) for t in self._servers[a].templates
        ]
        # A template mcpd cannot match claims no URI: it clashes with none, and it is
        # shown in the mcpd:// form, the only one that reads come back through.
        claiming = [(a, t) for a, t in every if _unmatchable(t) is None]
        overlaps = overlapping(claiming)
        listed = Listed(listers)
        budget = Budget(REBUILD_STEPS)
        plain: list[tuple[str, str]] = []
        wrapped: list[tuple[str, str]] = []
        for i, (alias, template) in enumerate(claiming):
            # Past the budget a template counts as clashing: its mcpd:// form still works.
            clash = i in overlaps or listed.claimed_elsewhere(alias, template, budget) is not False
            if clash or template.startswith(SCHEME):
                wrapped.append((alias, template))
            else:
                plain.append((alias, template))
        self.match_steps += budget.spent
        if budget.left <= 0:
            self._over_budget("listing", REBUILD_STEPS)
        self._plain_templates = plain
        self._wrapped_templates = wrapped
        self._shown_wrapped = set(every) - set(plain)
        self._by_agent_template = {self.agent_template(a, t): (a, t) for a, t in every}
        self._changed()

    def _changed(self) -> None:
        self._listing = None
        self._template_listing = None
        self.version += 1

    # -- the scheme --

    def route(self, uri: str) -> Routed | Ambiguous | None:
        """Which server an agent's URI goes to, and as what (None: no server's)."""
        inner = unwrap(uri)
        if inner is not None:
            return Routed(*inner) if inner[0] in self._servers else None
        owners = self._listers.get(uri)
        if owners:
            if len(owners) == 1:
                return Routed(owners[0], uri)
            return Ambiguous([wrap(a, uri) for a in owners])
        if len(self._servers) == 1:
            # Whatever its templates say, a URI no other server lists goes to it.
            return Routed(next(iter(self._servers)), uri)
        budget = Budget(ROUTE_STEPS)
        matched = _matching(self._plain_templates, uri, budget)
        if matched == []:
            # A template two servers share is shown in its mcpd:// forms, but an agent
            # may expand the server's own (a tool's text names it): say which to read.
            matched = _matching(self._wrapped_templates, uri, budget)
        self.match_steps += budget.spent
        if matched is None:
            self._over_budget("a URI", ROUTE_STEPS)
            return None
        if len(matched) == 1:
            return Routed(matched[0], uri)
        if len(matched) > 1:
            return Ambiguous([wrap(a, uri) for a in matched])
        return None

    def _over_budget(self, what: str, steps: int) -> None:
        """Say once per change of the lists that matching ran out of steps, naming the
        server with the most templates (the likeliest cause)."""
        if self._warned == self.version:
            return
        self._warned = self.version
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

    def to_agent(self, alias: str, uri: str) -> str:
        """The URI an agent is handed for ``alias``'s ``uri``: reading it comes back."""
        if uri.startswith(SCHEME):
            return wrap(alias, uri)
        routed = self.route(uri)
        if isinstance(routed, Routed) and routed.alias == alias:
            return uri
        return wrap(alias, uri)

    def held_for(self, alias: str, uri: str) -> str | None:
        """Why reading ``uri`` of ``alias`` is refused: it is not a resource the server
        lists, and a template of its that is held matches it (None: it is not)."""
        server = self._servers.get(alias)
        if server is None or not server.held or alias in self._listers.get(uri, ()):
            return None
        budget = Budget(ROUTE_STEPS)
        for template, why in sorted(server.held.items()):
            # Matched, or mcpd cannot tell (a template it cannot parse, a budget spent):
            # refused either way.
            if _unmatchable(template) is not None or budget.matches(template, uri) is not False:
                return why
        return None

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
