"""The resource templates as the agents who see one set of servers are shown them,
and the indexes their URIs are matched through.

A profile that does not show a server reads as if that server did not exist: its
templates claim nothing for the profile's agents, and a template of a shown server
that clashes only with the hidden server's is shown to them as the server wrote it.
Whether a template is shown in the ``mcpd://`` form then depends on the set of servers
an agent sees, and so does what its URIs are matched against: both are kept here,
one ``Scope`` per set, made when it is first needed from the claims kept per pair of
servers (no matching: that was done when the pairs changed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from .claims import Listings
from .routing import PrefixIndex
from .scheme import SCHEME, wrap

# Sets of servers whose scopes are kept at once; past it they are made again.
MAX_SCOPES: Final = 64


class Scope:
    __slots__ = ("aliases", "by_agent_template", "by_template", "plain", "shown_wrapped", "wrapped")

    def __init__(
        self, aliases: frozenset[str], lists: Listings, templates: Mapping[str, Sequence[str]]
    ) -> None:
        self.aliases = aliases
        every = [(a, t) for a in sorted(aliases) for t in templates[a]]
        # A template mcpd cannot match claims no URI: it clashes with none, and it is
        # shown in the mcpd:// form, the only one that reads come back through. Past
        # the budget a template counts as clashing: its mcpd:// form still works.
        claims, clash = lists.clashing(aliases)
        plain = [
            c
            for i, c in enumerate(claims)
            if i not in clash and not c.template.text.startswith(SCHEME)
        ]
        shown_plain = {(c.alias, c.template.text) for c in plain}
        self.plain = PrefixIndex(plain)
        # Those that can match, shown in the mcpd:// form.
        self.wrapped = PrefixIndex(
            c for c in claims if (c.alias, c.template.text) not in shown_plain
        )
        self.shown_wrapped = set(every) - shown_plain
        self.by_agent_template = {self.agent_template(a, t): (a, t) for a, t in every}
        # Each template as its servers wrote it: the servers that list it.
        self.by_template: dict[str, list[str]] = {}
        for a, t in every:
            self.by_template.setdefault(t, []).append(a)

    def agent_template(self, alias: str, template: str) -> str:
        return wrap(alias, template) if (alias, template) in self.shown_wrapped else template
