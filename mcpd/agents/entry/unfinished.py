"""How many bytes of lines begun and not yet ended the agent sockets' line connections
hold, all together and per user, and for how long one line may stay unfinished.

A connection reads its agent's lines whole, each up to ``max_line_bytes``, and holds
what has come of the one being sent until its newline; an agent may send most of a
line and stop, on as many connections as it has places. What they hold is shared out
as the places are (``places``; the door holds both), and as request bodies are on the HTTP side
(``http.body_budget``):

- each connection holds ``UNWEIGHED`` of a line apart from the rest, as much as one
  read brings, so that a line split between two reads costs no one anything;
- beyond that, everyone together may hold ``UNFINISHED_BUDGET`` (or four full lines,
  if ``max_line_bytes`` makes that more);
- one user other than mcpd's own and root the part of it that
  ``max_connections_per_uid`` is of ``max_connections`` (a full line at least);
- mcpd's own user and root that much more as ``OWNER_RESERVE`` is of
  ``max_connections`` (a full line at least), so that they can always send one.

A line that does not fit ends its connection, saying why, rather than wait: a wait
would hold the connection on lines of others it cannot see. And a line must end
within ``LINE_TIMEOUT`` of its first byte (the time mcpd itself does not read, while
its agent leaves replies unread, aside): an agent sends a line at once, and one that
stops halfway is let go.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import msgspec

from ...config.tables.model import DaemonConfig
from .peers import Peer, is_owner
from .places import OWNER_RESERVE, uid_quota

UNWEIGHED: Final = 64 * 1024
UNFINISHED_BUDGET: Final = 64 * 1024 * 1024
LINE_TIMEOUT: Final = 30.0


class LineOwner(msgspec.Struct, frozen=True):
    """Whose a connection's lines are: its user (None: one the socket cannot name),
    and whether that is mcpd's own user or root."""

    uid: int | None
    owner: bool


class UnfinishedLimits(msgspec.Struct, frozen=True):
    most: int  # everyone together
    per_uid: int  # one user other than mcpd's own and root
    reserve: int  # more for mcpd's own user and root


def unfinished_limits(d: DaemonConfig) -> UnfinishedLimits:
    line = d.max_line_bytes
    most = max(UNFINISHED_BUDGET, 4 * line)
    share = most * uid_quota(d) // d.max_connections
    reserve = most * OWNER_RESERVE // d.max_connections
    return UnfinishedLimits(most, min(most, max(line, share)), max(line, reserve))


class UnfinishedLines:
    """The bytes of unfinished lines held past each connection's ``UNWEIGHED``, all
    together and per user."""

    def __init__(self, settings: Callable[[], DaemonConfig]) -> None:
        self._settings = settings
        self.timeout = LINE_TIMEOUT
        self.total = 0
        self._by_uid: dict[int | None, int] = {}

    def of(self, uid: int | None) -> int:
        return self._by_uid.get(uid, 0)

    def hold(self, peer: Peer | None) -> LineHold:
        """What one connection of ``peer`` holds, nothing yet."""
        return LineHold(self, LineOwner(None if peer is None else peer.uid, is_owner(peer)))

    def refusal(self, whose: LineOwner, more: int) -> str | None:
        """Why ``more`` bytes of ``whose`` do not fit (None: they do)."""
        limits = unfinished_limits(self._settings())
        if whose.owner:
            if self.total + more <= limits.most + limits.reserve:
                return None
            return (
                f"the agents' connections hold {self.total} bytes of lines not yet "
                f"ended, and {more} more would pass the {limits.most} all may hold and "
                f"the {limits.reserve} kept for mcpd's own user and root"
            )
        has = self.of(whose.uid)
        if has + more > limits.per_uid:
            user = "the user mcpd cannot name" if whose.uid is None else f"uid {whose.uid}"
            return (
                f"{user} holds {has} bytes of lines not yet ended on its connections, "
                f"and {more} more would pass the {limits.per_uid} one user may hold "
                "(its part as daemon.max_connections_per_uid is of max_connections)"
            )
        if self.total + more > limits.most:
            return (
                f"the agents' connections hold {self.total} bytes of lines not yet "
                f"ended, and {more} more would pass the {limits.most} all may hold"
            )
        return None

    def change(self, uid: int | None, by: int) -> None:
        self.total += by
        left = self.of(uid) + by
        if left:
            self._by_uid[uid] = left
        else:
            self._by_uid.pop(uid, None)


class LineHold:
    """What one connection's unfinished line holds of ``UnfinishedLines``."""

    __slots__ = ("_lines", "_whose", "weighed")

    def __init__(self, lines: UnfinishedLines, whose: LineOwner) -> None:
        self._lines = lines
        self._whose = whose
        self.weighed = 0

    @property
    def timeout(self) -> float:
        return self._lines.timeout

    def weigh(self, held: int) -> str | None:
        """The connection holds ``held`` bytes of a line now; why they do not fit
        (None: they do, and are counted)."""
        weighed = max(0, held - UNWEIGHED)
        more = weighed - self.weighed
        if more > 0:
            refusal = self._lines.refusal(self._whose, more)
            if refusal is not None:
                return refusal
        if more:
            self._lines.change(self._whose.uid, more)
            self.weighed = weighed
        return None

    def release(self) -> None:
        """The connection ends: what it held is given back."""
        if self.weighed:
            self._lines.change(self._whose.uid, -self.weighed)
            self.weighed = 0
