"""Bytes held on the agents' behalf shared out as the places are (``places``): the
unfinished lines of the sockets' line connections (``unfinished``) and the request
bodies of the HTTP side (``http.body_budget``) follow the one rule, each with a budget
of its own and a least share of its own (one full line, one full body):

- everyone together may hold the budget;
- one user other than mcpd's own and root the part of it that
  ``max_connections_per_uid`` is of ``max_connections``, the least share at least and
  the budget at most;
- mcpd's own user and root that much more as ``OWNER_RESERVE`` is of
  ``max_connections``, the least share at least.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ...config.tables.model import DaemonConfig
from .places import OWNER_RESERVE, uid_quota


class ByteShares(msgspec.Struct, frozen=True):
    most: int  # everyone together
    per_uid: int  # one user other than mcpd's own and root
    reserve: int  # more for mcpd's own user and root

    def passed(self, total: int, has: int, more: int) -> Literal["share", "all"] | None:
        """Which bound ``more`` bytes of a user other than mcpd's own and root would
        pass, holding ``has`` of the ``total`` held: its share before all's, so that a
        refusal names the one the user can do something about (None: neither)."""
        if has + more > self.per_uid:
            return "share"
        if total + more > self.most:
            return "all"
        return None


def byte_shares(d: DaemonConfig, budget: int, least: int) -> ByteShares:
    """The shares of ``budget`` bytes, none less than ``least``."""
    share = budget * uid_quota(d) // d.max_connections
    reserve = budget * OWNER_RESERVE // d.max_connections
    return ByteShares(budget, min(budget, max(least, share)), max(least, reserve))
