"""The aggregated resources and resource templates: what each server lists, put
through the gate (``gate``: a held template, a server held whole), and what agents
are shown of them, each URI and template in the form the ``mcpd://`` scheme hands it
(``resource_routes``, where the table puts what each server lists).

A server's held template refuses reads of the URIs it matches that the server does
not list, and a server held whole refuses every read (``held_for``), until a person
approves them. A held template matches a URI as written, and as any reading a server
may take of it (``uri_spellings.forms``: a ``file`` URI's host dropped, its query dropped,
a web URL's host as a URL parser reads it) against the template read so too: the test
by which a respelled template is held as a change of the approved one, so the URIs
it was approved for are held with it. What one agent sees is as its profile (its
``Sight``) shows the servers and their resources.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Final, NamedTuple

import msgspec
from msgspec import Raw

from protocol.mcp import features, uri_spellings, uri_templates

from ..gating.gate import ListGate
from ..gating.limits import first_listed
from ..tables.shown import agent_resource, agent_template
from .claims import ROUTE_STEPS, Budget, Claim, check_templates, parsed_template
from .resource_routes import ResourceRoutes
from .scheme import SCHEME, Sight, wrap

_encode: Final = msgspec.json.Encoder().encode
# Sets of rules whose verdicts one server's lists keep: one a profile, as many as a
# config holds, and past them they are judged afresh.
_SIGHTS_KEPT: Final = 64


class Hold(NamedTuple):
    """Why reading a URI is refused: in words a model can act on, and the held template
    that reads it, by its URI template (None: its server is held whole)."""

    why: str
    template: str | None = None


class _HeldClaim(NamedTuple):
    """A held template: its URI template, parsed as written and as read (None: one
    mcpd cannot match), and why it is held."""

    template: str
    written: uri_templates.Template | None
    read: uri_templates.Template | None
    why: str


def _held_claim(template: str, why: str) -> _HeldClaim:
    # A read form that does not parse (an escaped brace decoded in its authority) is
    # left out: the template as written still holds, and it must not hold every URI.
    as_read = parsed_template(uri_templates.read_form(template))
    return _HeldClaim(template, parsed_template(template), as_read, why)


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
        "named",
        "raw",
        "resources",
        "templates",
        "verdicts",
    )

    def __init__(
        self,
        alias: str,
        raw: tuple[list[features.Resource], list[features.ResourceTemplate]],
        gate: ListGate,
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
        shapes = (parsed_template(t.uriTemplate) for t in self.templates)
        self.claims = [Claim(alias, p) for p in shapes if p is not None]
        self.held_claims = [_held_claim(t, why) for t, why in sorted(self.held.items())]
        self.available = True
        self.marker: str | None = None
        # What each sight's rules (``Sight.rules``) made of each URI and template the
        # lists hold, kept while they hold it: judging one reads the whole of it in
        # every spelling, and every connection and list change asks again.
        self.named = {r.uri for r in self.resources} | {t.uriTemplate for t in self.templates}
        self.verdicts: dict[Hashable, dict[str, bool]] = {}

    def kept_verdicts(self, old: _Server) -> None:
        """The verdicts of the server's lists before, on what these still hold: a
        verdict follows from a URI and the rules alone."""
        for key, verdicts in old.verdicts.items():
            self.verdicts[key] = {u: v for u, v in verdicts.items() if u in self.named}

    def admitted(self, alias: str, uri: str, sight: Sight) -> bool:
        """``sight.admits_resource(alias, uri)``, kept for a URI or template listed."""
        key = sight.rules()
        if key is None or uri not in self.named:
            return sight.admits_resource(alias, uri)
        verdicts = self.verdicts.get(key)
        if verdicts is None:
            if len(self.verdicts) >= _SIGHTS_KEPT:
                self.verdicts.clear()
            verdicts = self.verdicts[key] = {}
        verdict = verdicts.get(uri)
        if verdict is None:
            verdict = verdicts[uri] = sight.admits_resource(alias, uri)
        return verdict


class _Judged(Sight):
    """``sight``, its verdicts on what the servers list kept with their lists."""

    def __init__(self, sight: Sight, servers: dict[str, _Server]) -> None:
        self._sight = sight
        self._servers = servers

    def has_server(self, alias: str) -> bool:
        return self._sight.has_server(alias)

    def admits_resource(self, alias: str, uri: str) -> bool:
        server = self._servers.get(alias)
        if server is None:
            return self._sight.admits_resource(alias, uri)
        return server.admitted(alias, uri, self._sight)

    def rules(self) -> Hashable | None:
        return self._sight.rules()


class ResourceTable:
    def __init__(self, gate: ListGate | None = None) -> None:
        self.gate = gate if gate is not None else ListGate()
        self._servers: dict[str, _Server] = {}
        # Each resource and template as agents see it, encoded once per change, by
        # (alias, its place in the server's list, whether in the mcpd:// form).
        self._encoded: dict[tuple[str, int, bool], Raw] = {}
        self._encoded_templates: dict[tuple[str, int, bool], Raw] = {}
        self.version = 0
        self.routes = ResourceRoutes(lambda: self.version)

    # -- changes --

    def update(
        self,
        alias: str,
        resources: Sequence[features.Resource],
        templates: Sequence[features.ResourceTemplate],
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
        self, alias: str, raw: tuple[list[features.Resource], list[features.ResourceTemplate]]
    ) -> None:
        old = self._servers.get(alias)
        server = _Server(alias, raw, self.gate)
        if old is not None:
            server.available, server.marker = old.available, old.marker
            server.kept_verdicts(old)
        self._servers[alias] = server
        self._changed()
        uris = (r.uri for r in server.resources)
        templates = [t.uriTemplate for t in server.templates]
        self.routes.put(alias, uris, server.claims, templates)

    def remove(self, alias: str) -> bool:
        if self._servers.pop(alias, None) is None:
            return False
        self.routes.remove(alias)
        self._changed()
        return True

    def withdraw(self, alias: str) -> bool:
        """The server no longer offers resources: none of its resources or templates is
        listed, waits for approval or routes a URI to it; whether the table had it."""
        if alias not in self._servers:
            return False
        self.gate.withdrawn(alias, "resource")
        self.gate.withdrawn(alias, "template")
        return self.remove(alias)

    def set_availability(self, alias: str, available: bool, marker: str | None = None) -> bool:
        server = self._servers.get(alias)
        if server is None or (server.available, server.marker) == (available, marker):
            return False
        server.available, server.marker = available, marker
        self._changed()
        return True

    def _changed(self) -> None:
        self._encoded.clear()
        self._encoded_templates.clear()
        self.version += 1

    # -- holds --

    def held_for(self, alias: str, uri: str, budget: Budget | None = None) -> Hold | None:
        """Why reading (or subscribing to) ``uri`` of ``alias`` is refused: the server
        is held whole, or ``uri`` is not a resource it lists and a template of its that
        is held matches it (None: it is not refused)."""
        server = self._servers.get(alias)
        if server is None:
            return None
        all_held = self.gate.held_whole(alias)
        if all_held is not None:
            return Hold(all_held)
        if not server.held_claims or alias in self.routes.listers(uri, None):
            return None
        whole = budget if budget is not None else Budget(ROUTE_STEPS)
        mine = whole.part(ROUTE_STEPS)
        # Every reading mcpd knows a server may take of it, with its query and without.
        _, read, bare = uri_spellings.forms(uri)
        readings = list(dict.fromkeys((*read, *bare)))
        try:
            for held in server.held_claims:
                # Matched, or mcpd cannot tell (a template it cannot parse, a budget
                # spent): refused either way.
                if held.written is None or mine.matches(held.written, uri) is not False:
                    return Hold(held.why, held.template)
                if held.read is None:
                    continue
                if any(mine.matches(held.read, r) is not False for r in readings):
                    return Hold(held.why, held.template)
            return None
        finally:
            whole.settle(mine)
            self.routes.match_steps += mine.spent

    def held_template(self, alias: str, template: str) -> str | None:
        """Why a completion for ``template`` of ``alias`` (the server's URI template)
        is refused: the template, or its whole server, is held (None: it is not)."""
        server = self._servers.get(alias)
        if server is None:
            return None
        return self.gate.held_whole(alias) or server.held.get(template)

    # -- queries --

    def listing(self, sight: Sight | None = None) -> list[Raw]:
        """The resources agents of ``sight`` see, each plain exactly when its server is
        the only one they see list it."""
        sight = self._judged(sight)
        out = []
        for a in sorted(self._servers):
            for i, r in enumerate(self._servers[a].resources):
                if sight is not None and not sight.admits_resource(a, r.uri):
                    continue
                wrapped = r.uri.startswith(SCHEME) or self.routes.listers(r.uri, sight) != [a]
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
        sight = self._judged(sight)
        scope = self.routes.scope(sight)
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

    def _judged(self, sight: Sight | None) -> Sight | None:
        return None if sight is None else _Judged(sight, self._servers)

    def count(self, alias: str) -> tuple[int, int]:
        server = self._servers.get(alias)
        return (len(server.resources), len(server.templates)) if server else (0, 0)

    def known(self, alias: str) -> bool:
        return alias in self._servers

    def raw(
        self, alias: str
    ) -> tuple[list[features.Resource], list[features.ResourceTemplate]] | None:
        """The server's resources and templates as it listed them; None if never."""
        server = self._servers.get(alias)
        return (list(server.raw[0]), list(server.raw[1])) if server else None
