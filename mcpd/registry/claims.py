"""Which servers' resource templates could claim the same URI, found at a cost that
no server's lists can blow up.

Servers choose their templates and URIs, and a hostile one may list thousands of
templates built to be slow to match. Two costs are bounded here:

- Whether two servers' templates may overlap is decided by their literal prefixes
  (``uritemplate.may_overlap``). Comparing every pair is quadratic in the templates;
  sorting the prefixes once finds every overlapping pair's servers in one sweep.
- Whether a template matches a URI another server lists is only asked of the listed
  URIs that start with the template's prefix (a contiguous run of the sorted URIs),
  and every match draws on one budget of matching steps. When the budget runs out,
  the templates not yet decided count as clashing: the safe side, since a clashing
  template is shown in the ``mcpd://`` form, which always reads back to its server.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from protocol import uritemplate as tpl

# Matching steps one URI may cost against every template, and one rebuild of the
# table against every listed URI. A mismatch costs a step or two and a match about
# the URI's length, so real servers stay far below both.
ROUTE_STEPS: Final = 200_000
REBUILD_STEPS: Final = 2_000_000

# A summary of the servers seen in one part of the sweep: none, one alias, or several.
_MANY: Final = "\0several"


def _merge(a: str | None, b: str | None) -> str | None:
    if a is None:
        return b
    if b is None or a == b:
        return a
    return _MANY


def _other(seen: str | None, alias: str) -> bool:
    return seen is not None and seen != alias


class Budget:
    """Matching steps still to spend; ``spent`` counts what was."""

    __slots__ = ("left", "spent")

    def __init__(self, steps: int) -> None:
        self.left = steps
        self.spent = 0

    def matches(self, template: str, uri: str) -> bool | None:
        """Whether ``uri`` matches ``template`` (one mcpd can parse); None once the
        budget is spent."""
        if self.left <= 0:
            return None
        verdict = tpl.parse(template).match(uri, self.left)
        self.left -= verdict.steps
        self.spent += verdict.steps
        return None if verdict.exhausted else verdict.matched


def overlapping(templates: Sequence[tuple[str, str]]) -> set[int]:
    """The indexes of the ``(alias, template)`` pairs whose literal prefix is a prefix
    of another server's, or has another server's as a prefix.

    In sorted order, every entry between a prefix and a string that starts with it
    starts with it too, so a stack of the entries that are prefixes of the current one
    holds all its shorter overlaps; what a popped entry's longer overlaps were is
    carried down to it from the entries above it."""
    order = sorted(range(len(templates)), key=lambda i: tpl.literal_prefix(templates[i][1]))
    clash: set[int] = set()
    # Per open entry: its index, its prefix, the servers of the entries below it (its
    # shorter overlaps) and of those pushed above it since (its longer overlaps).
    stack: list[tuple[int, str, str | None, list[str | None]]] = []

    def pop() -> None:
        i, _, _, above = stack.pop()
        if _other(above[0], templates[i][0]):
            clash.add(i)
        if stack:
            parent = stack[-1][3]
            parent[0] = _merge(_merge(parent[0], above[0]), templates[i][0])

    for i in order:
        alias = templates[i][0]
        prefix = tpl.literal_prefix(templates[i][1])
        while stack and not prefix.startswith(stack[-1][1]):
            pop()
        below = _merge(stack[-1][2], templates[stack[-1][0]][0]) if stack else None
        if _other(below, alias):
            clash.add(i)
        stack.append((i, prefix, below, [None]))
    while stack:
        pop()
    return clash


class Listed:
    """The URIs servers list, sorted, to find those that start with a prefix."""

    def __init__(self, listers: Mapping[str, Iterable[str]]) -> None:
        self._uris = sorted(listers)
        self._owners = {uri: frozenset(owners) for uri, owners in listers.items()}

    def claimed_elsewhere(self, alias: str, template: str, budget: Budget) -> bool | None:
        """Whether ``template`` matches a URI that ``alias`` does not list (None: the
        budget ran out first)."""
        prefix = tpl.literal_prefix(template)
        uris = self._uris
        for k in range(bisect.bisect_left(uris, prefix), len(uris)):
            uri = uris[k]
            if not uri.startswith(prefix):
                break
            if alias in self._owners[uri]:
                continue
            found = budget.matches(template, uri)
            if found is not False:
                return found
        return False
