"""Finding the templates that may claim a URI without looking at the others.

Every expansion of a template starts with the template's literal prefix, so only the
templates whose prefix starts the URI need matching. The distinct prefixes are kept
sorted, each with the longest other prefix in the index that starts it (its parent).
The prefixes that start a URI are then all on one chain: the greatest prefix not after
the URI (a bisection) and its parents, those no longer than what it shares with the
URI. What a lookup costs (the bisection's comparisons, the characters shared, the
chain) is drawn from the caller's budget, like the matches that follow it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from .claims import Budget, Claim


def _shared(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` begin with alike."""
    if b.startswith(a):
        return len(a)
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class PrefixIndex:
    __slots__ = ("_groups", "_parents", "_prefixes", "_probe")

    def __init__(self, claims: Iterable[Claim]) -> None:
        by_prefix: dict[str, list[Claim]] = {}
        for claim in claims:
            by_prefix.setdefault(claim.template.prefix, []).append(claim)
        self._prefixes = sorted(by_prefix)
        self._groups = [by_prefix[p] for p in self._prefixes]
        # In sorted order, the prefixes of an entry are on the stack when it comes.
        self._parents: list[int] = []
        stack: list[int] = []
        for i, prefix in enumerate(self._prefixes):
            while stack and not prefix.startswith(self._prefixes[stack[-1]]):
                stack.pop()
            self._parents.append(stack[-1] if stack else -1)
            stack.append(i)
        self._probe = len(self._prefixes).bit_length() + 1

    def find(self, uri: str, budget: Budget) -> list[Claim] | None:
        """The claims whose prefix ``uri`` starts with; None once the budget is spent."""
        if not self._prefixes:
            return []
        if not budget.spend(self._probe):
            return None
        k = bisect.bisect_right(self._prefixes, uri) - 1
        if k < 0:
            return []
        # Each prefix of the URI in the index lies between itself and the URI in
        # sorted order, so it starts this one, the greatest not after the URI.
        nearest = self._prefixes[k]
        if not budget.spend(min(len(nearest), len(uri)) + 1):
            return None
        shared = _shared(nearest, uri)
        found: list[Claim] = []
        while k >= 0:
            if not budget.spend(1):
                return None
            if len(self._prefixes[k]) <= shared:
                found += self._groups[k]
            k = self._parents[k]
        return found


def claimants(index: PrefixIndex, uri: str, budget: Budget) -> list[str] | None:
    """The servers whose templates in ``index`` match ``uri``, sorted; None once the
    budget is spent."""
    candidates = index.find(uri, budget)
    if candidates is None:
        return None
    found: set[str] = set()
    for claim in candidates:
        if claim.alias in found:
            continue
        matched = budget.matches(claim.template, uri)
        if matched is None:
            return None
        if matched:
            found.add(claim.alias)
    return sorted(found)
