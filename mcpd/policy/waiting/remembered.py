"""Approvals remembered for the rest of an agent's connection (``remember =
"connection"``): the same tool of the same rule, defined as it was then, is approved
without asking again. Each is of a rule, a server, the server's name for the tool and
the digest of the tool's definition (``policy.decision.gate.defined``): a tool defined anew is
asked about again, and one whose server a reload stopped or started, or whose rules
changed, too. A connection keeps only so many."""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

_PER_CONNECTION: Final = 256

# (rule, server, the server's name for the tool, the digest of the tool's definition).
_Approved = tuple[int | None, str, str, bytes]


class RememberedApprovals:
    def __init__(self) -> None:
        self._kept: dict[str, set[_Approved]] = {}

    def holds(
        self, connection: str, rule: int | None, server: str, original: str, definition: bytes
    ) -> bool:
        return (rule, server, original, definition) in self._kept.get(connection, ())

    def add(
        self, connection: str, rule: int | None, server: str, original: str, definition: bytes
    ) -> None:
        kept = self._kept.setdefault(connection, set())
        if len(kept) < _PER_CONNECTION:
            kept.add((rule, server, original, definition))

    def forget(self, connection: str) -> None:
        """The connection ended: what was approved for it goes with it."""
        self._kept.pop(connection, None)

    def forget_all(self) -> None:
        """The rules changed: what was approved under them holds no more."""
        self._kept.clear()

    def forget_servers(self, servers: Collection[str]) -> None:
        """A reload stopped or started these servers: what was approved of their tools
        was approved of the programs, or the settings, that ran before."""
        for kept in self._kept.values():
            kept.difference_update([k for k in kept if k[1] in servers])
