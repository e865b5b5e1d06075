"""How long an open circuit waits before its probe (``breaker``).

The first opening of an outage waits the base; each one after waits longer by a factor,
up to a cap, so a server that keeps failing is tried less and less often, never as if it
had recovered. Only a call that succeeds ends the outage: the next one starts from the
base again.
"""

from __future__ import annotations


class Cooldown:
    __slots__ = ("base", "cap", "factor", "next")

    def __init__(self, base: float, factor: float, cap: float, grown: float = 1.0) -> None:
        """``grown``: how many times the base the next opening waits (within the cap)."""
        self.base = base
        self.factor = factor
        self.cap = cap
        self.next = min(cap, base * grown)  # what the next opening waits

    def take(self) -> float:
        """The wait of an opening now; the next one's is longer, up to the cap."""
        wait = self.next
        # Multiplying a stored value rather than raising to a power cannot overflow.
        self.next = min(self.cap, wait * self.factor)
        return wait

    def restart(self) -> None:
        """The outage is over: the next opening waits the base."""
        self.next = self.base

    def retuned(self, base: float, factor: float, cap: float) -> Cooldown:
        """This cooldown under new settings: grown as far from the new base as it had
        grown from its own, within the new cap."""
        return Cooldown(base, factor, cap, self.next / self.base)
