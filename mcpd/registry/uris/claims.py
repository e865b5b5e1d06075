"""Which servers' resource templates could claim the same URI, found at a cost that
no server's lists can blow up.

Servers choose their templates and URIs, and a hostile one may list thousands of
templates built to be slow to match. Every cost is bounded here:

- Whether two servers' templates may overlap is decided by their literal prefixes
  (every expansion begins with its template's), computed once per template when it
  is parsed: templates whose prefixes differ before either ends never share a URI.
  Comparing every pair is quadratic in the templates; sorting the prefixes once finds
  every overlapping pair's servers in one sweep.
- Whether a template matches a URI another server lists is asked per pair of servers
  (one's templates, the other's URIs), and a pair is checked again only when one of
  the two servers' lists changes. A server's templates are never matched against its
  own URIs: each side of a pair is given only the URIs the other does not list, and
  of those only the ones that start with the template's prefix (a contiguous run of
  the sorted URIs). Every match and every lookup draws on the budget of the change
  that asked it. When the budget runs out, the templates not yet decided count as
  clashing: the safe side, since a clashing template is shown in the ``mcpd://``
  form, which always reads back to its server.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Collection, Iterable, Sequence
from typing import Final, NamedTuple

from protocol.mcp import features, uri_templates
from protocol.shown.logfields import log_extra

# Matching steps (``uri_templates.MatchVerdict.steps``, and the lookups that find what to
# match) that may be spent: on one URI against every template; on the links of one
# result together; on one change of a server's lists, half on its templates against
# the others' URIs and half on the others' templates against its URIs. A mismatch
# costs a step or two and a match about the URI's length plus its template's, so
# real servers stay far below each.
ROUTE_STEPS: Final = 200_000
RESULT_STEPS: Final = 500_000
REBUILD_STEPS: Final = 500_000

logger = logging.getLogger("mcpd.registry")

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
    """Matching steps still to spend; ``spent`` counts what was, ``out`` says whether
    something was left undecided for want of steps."""

    __slots__ = ("left", "out", "spent")

    def __init__(self, steps: int) -> None:
        self.left = steps
        self.spent = 0
        self.out = False

    def spend(self, steps: int) -> bool:
        """Take ``steps`` for work about to be done; False (and the budget is out) if
        fewer are left."""
        if steps > self.left:
            self.left, self.out = 0, True
            return False
        self.left -= steps
        self.spent += steps
        return True

    def matches(self, template: uri_templates.Template, uri: str) -> bool | None:
        """Whether ``uri`` matches ``template``; None once the budget is spent."""
        if self.left <= 0:
            self.out = True
            return None
        verdict = template.match(uri, self.left)
        self.left -= verdict.steps
        self.spent += verdict.steps
        if verdict.exhausted:
            self.left, self.out = 0, True
            return None
        return verdict.matched

    def part(self, steps: int) -> Budget:
        """A budget of at most ``steps`` out of this one; ``settle`` it after."""
        return Budget(min(steps, self.left))

    def settle(self, part: Budget) -> None:
        self.left -= part.spent
        self.spent += part.spent


def parsed_template(template: str) -> uri_templates.Template | None:
    """The template ready to match; None if mcpd cannot match it (it claims no URI)."""
    try:
        return uri_templates.parse(template)
    except uri_templates.TemplateError:
        return None


def _unmatchable(template: str) -> str | None:
    """Why mcpd cannot match URIs against ``template``; None when it can."""
    try:
        uri_templates.parse(template)
    except uri_templates.TemplateError as exc:
        return str(exc)
    return None


def check_templates(alias: str, templates: Sequence[features.ResourceTemplate]) -> None:
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


class Claim(NamedTuple):
    """A template a server lists that mcpd can match (its prefix is computed once)."""

    alias: str
    template: uri_templates.Template


def overlapping(claims: Sequence[Claim]) -> set[int]:
    """The indexes of the claims whose literal prefix is a prefix of another server's,
    or has another server's as a prefix.

    In sorted order, every entry between a prefix and a string that starts with it
    starts with it too, so a stack of the entries that are prefixes of the current one
    holds all its shorter overlaps; what a popped entry's longer overlaps were is
    carried down to it from the entries above it."""
    order = sorted(range(len(claims)), key=lambda i: claims[i].template.prefix)
    clash: set[int] = set()
    # Per open entry: its index, its prefix, the servers of the entries below it (its
    # shorter overlaps) and of those pushed above it since (its longer overlaps).
    stack: list[tuple[int, str, str | None, list[str | None]]] = []

    def pop() -> None:
        i, _, _, above = stack.pop()
        if _other(above[0], claims[i].alias):
            clash.add(i)
        if stack:
            parent = stack[-1][3]
            parent[0] = _merge(_merge(parent[0], above[0]), claims[i].alias)

    for i in order:
        alias = claims[i].alias
        prefix = claims[i].template.prefix
        while stack and not prefix.startswith(stack[-1][1]):
            pop()
        below = _merge(stack[-1][2], claims[stack[-1][0]].alias) if stack else None
        if _other(below, alias):
            clash.add(i)
        stack.append((i, prefix, below, [None]))
    while stack:
        pop()
    return clash


def claimed(claims: Sequence[Claim], uris: Sequence[str], budget: Budget) -> set[int]:
    """The indexes of ``claims`` that match one of ``uris`` (sorted), or that the
    budget ran out before deciding."""
    found: set[int] = set()
    probe = len(uris).bit_length() + 1  # the comparisons of one bisection
    for i, claim in enumerate(claims):
        prefix = claim.template.prefix
        if not budget.spend(probe):
            return found | set(range(i, len(claims)))
        k = bisect.bisect_left(uris, prefix)
        while k < len(uris) and budget.spend(len(prefix) + 1) and uris[k].startswith(prefix):
            matched = budget.matches(claim.template, uris[k])
            if matched:
                found.add(i)
                break
            if matched is None:
                break
            k += 1
        if budget.out:
            return found | set(range(i, len(claims)))
    return found


class Listings:
    """What each server lists, as claims need it: its URIs (sorted, and as a set) and
    its templates; and per pair of servers, which templates of the first match a URI
    only the second lists."""

    def __init__(self) -> None:
        self.listers: dict[str, list[str]] = {}  # URI -> the servers that list it, sorted
        self._uris: dict[str, tuple[list[str], frozenset[str]]] = {}
        self._claims: dict[str, list[Claim]] = {}
        self._claimed: dict[tuple[str, str], set[int]] = {}

    def put(self, alias: str, uris: Iterable[str], claims: list[Claim]) -> tuple[int, bool]:
        """A server's lists, new or changed: only the pairs it is in are checked again.
        The steps spent on them, and whether the budget ran out."""
        self.remove(alias)
        listed = frozenset(uris)
        self._uris[alias] = (sorted(listed), listed)
        self._claims[alias] = claims
        for uri in listed:
            bisect.insort(self.listers.setdefault(uri, []), alias)
        own, theirs = Budget(REBUILD_STEPS // 2), Budget(REBUILD_STEPS // 2)
        for other in sorted(self._uris):
            if other == alias:
                continue
            their_uris, their_set = self._uris[other]
            mine = [u for u in their_uris if u not in listed]
            self._claimed[(alias, other)] = claimed(claims, mine, own)
            theirs_only = [u for u in self._uris[alias][0] if u not in their_set]
            self._claimed[(other, alias)] = claimed(self._claims[other], theirs_only, theirs)
        return own.spent + theirs.spent, own.out or theirs.out

    def remove(self, alias: str) -> None:
        old = self._uris.pop(alias, None)
        self._claims.pop(alias, None)
        for uri in old[0] if old is not None else ():
            owners = self.listers[uri]
            owners.remove(alias)
            if not owners:
                del self.listers[uri]
        for pair in [p for p in self._claimed if alias in p]:
            del self._claimed[pair]

    def clashing(self, among: Collection[str] | None = None) -> tuple[list[Claim], set[int]]:
        """The claims of every server (of those ``among``, if given), and the indexes
        of those that clash with another of those servers' templates or match a URI
        another of them lists: what the others do is not looked at."""
        aliases = sorted(a for a in self._claims if among is None or a in among)
        every: list[Claim] = []
        clash: set[int] = set()
        claimed_by = {alias: set[int]() for alias in aliases}
        for (alias, other), indexes in self._claimed.items():
            if alias in claimed_by and other in claimed_by:
                claimed_by[alias] |= indexes
        for alias in aliases:
            base = len(every)
            every += self._claims[alias]
            clash |= {base + i for i in claimed_by[alias]}
        return every, clash | overlapping(every)
