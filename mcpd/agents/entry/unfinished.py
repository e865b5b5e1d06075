"""How many bytes of lines begun and not yet ended the agent sockets' line connections
hold, all together and per user, and for how long one line may stay unfinished.

A connection reads its agent's lines whole, each up to ``max_line_bytes``, and holds
what has come of the one being sent until its newline; an agent may send most of a
line and stop, on as many connections as it has places. What they hold is shared out
as the places are (``places``; the door holds both), by the rule request bodies on the HTTP
side (``http.body_budget``) follow too (``shares``):

- each connection holds ``UNWEIGHED`` of a line apart from the rest, as much as one
  read brings, so that a line split between two reads costs no one anything;
- beyond that, everyone together may hold ``UNFINISHED_BUDGET`` (or four full lines,
  if ``max_line_bytes`` makes that more);
- one user other than mcpd's own and root the part of it that
  ``max_connections_per_uid`` is of ``max_connections`` (a full line at least);
- mcpd's own user and root, on the daemon's own socket, that much more as
  ``OWNER_RESERVE`` is of ``max_connections`` (a full line at least), as ``places``
  keeps their reserve there alone.

A line that does not fit makes room by ending the connections whose unfinished lines
began before it, oldest first, each saying why, as many as it takes and no more. A
line written at once ends within moments of its first byte, so the lines held longest
are those of agents that stopped halfway: they are the ones let go, not the line that
needs the room. An agent that opens fresh connections to keep its lines young gains
nothing by it: to stay ahead it would have to send all it holds again within the
moments an honest line takes, and lines begun before the honest one are still the
first to go (a line sent slowly, over seconds, is no longer safe from it). When the
lines begun before it are too few to make room (a user other than mcpd's own past
its share gives up its own older lines alone), the line that does not fit ends its
own connection instead, rather than wait: a wait would hold the connection on lines
of others it cannot see. And a line must end within ``LINE_TIMEOUT`` of its first
byte (the time mcpd itself does not read, while its agent leaves replies unread,
aside): an agent sends a line at once, and one that stops halfway is let go.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import msgspec

from ...config.tables.model import DaemonConfig
from .peers import Peer, is_owner
from .shares import ByteShares, byte_shares

UNWEIGHED: Final = 64 * 1024
UNFINISHED_BUDGET: Final = 64 * 1024 * 1024
LINE_TIMEOUT: Final = 30.0


class LineOwner(msgspec.Struct, frozen=True):
    """Whose a connection's lines are: its user (None: one the socket cannot name),
    whether that is mcpd's own user or root (who has no share of its own), and whether
    it came to the daemon's own socket, where the owner's reserve is kept."""

    uid: int | None
    owner: bool
    own_socket: bool = True


def unfinished_limits(d: DaemonConfig) -> ByteShares:
    line = d.max_line_bytes
    return byte_shares(d, max(UNFINISHED_BUDGET, 4 * line), line)


class UnfinishedLines:
    """The bytes of unfinished lines held past each connection's ``UNWEIGHED``, all
    together and per user."""

    def __init__(self, settings: Callable[[], DaemonConfig]) -> None:
        self._settings = settings
        self.timeout = LINE_TIMEOUT
        self.total = 0
        self._by_uid: dict[int | None, int] = {}
        self._holding: set[LineHold] = set()  # those with bytes weighed

    def of(self, uid: int | None) -> int:
        return self._by_uid.get(uid, 0)

    def hold(self, peer: Peer | None, profile_socket: str | None = None) -> LineHold:
        """What one connection of ``peer`` holds, nothing yet; ``profile_socket``: the
        profile whose own socket it came to (None: the daemon's)."""
        uid = None if peer is None else peer.uid
        return LineHold(self, LineOwner(uid, is_owner(peer), profile_socket is None))

    def _room(self, whose: LineOwner, limits: ByteShares) -> int:
        """What all together may hold when ``whose`` weighs more."""
        if whose.owner and whose.own_socket:
            return limits.most + limits.reserve
        return limits.most

    def make_room(self, hold: LineHold, more: int) -> str | None:
        """Why ``more`` bytes of ``hold`` do not fit (None: they do, once the connections
        holding lines begun before its own, oldest first, are let go as needed)."""
        whose = hold.whose
        limits = unfinished_limits(self._settings())
        room, share = self._room(whose, limits), limits.per_uid
        total, has = self.total, self.of(whose.uid)

        def over() -> tuple[bool, bool]:  # past what all may hold; past its user's share
            return total + more > room, not whose.owner and has + more > share

        past_all, past_share = over()
        if not (past_all or past_share):
            return None
        older = sorted((h for h in self._holding if h.began < hold.began), key=_began)
        victims: list[tuple[LineHold, str]] = []
        for other in older:
            same_user = other.whose.uid == whose.uid
            if past_all or (past_share and same_user):
                bound = (
                    f"the {limits.most} bytes all together"
                    if past_all
                    else f"the {share} bytes one user other than mcpd's own and root"
                )
                victims.append((other, bound))
                total -= other.weighed
                if same_user:
                    has -= other.weighed
                past_all, past_share = over()
                if not (past_all or past_share):
                    break
        if past_all or past_share:
            return self.refusal(whose, more)
        for other, bound in victims:
            other.cut(
                f"the agents' connections held as much of lines not yet ended as they may "
                f"({bound} may hold), and its line, begun "
                f"{hold.began - other.began:.1f} s before another that needed room, with "
                f"{other.weighed + UNWEIGHED} bytes of it come, was among the oldest: a "
                "line is sent at once, and the oldest make room"
            )
        return None

    def refusal(self, whose: LineOwner, more: int) -> str | None:
        """Why ``more`` bytes of ``whose`` do not fit as things stand (None: they do)."""
        limits = unfinished_limits(self._settings())
        if whose.owner:
            if self.total + more <= self._room(whose, limits):
                return None
            if not whose.own_socket:
                return (
                    f"the agents' connections hold {self.total} bytes of lines not yet "
                    f"ended, and {more} more would pass the {limits.most} all may hold "
                    "(the more kept for mcpd's own user and root is on mcpd's own "
                    "socket, not a profile's)"
                )
            return (
                f"the agents' connections hold {self.total} bytes of lines not yet "
                f"ended, and {more} more would pass the {limits.most} all may hold and "
                f"the {limits.reserve} kept for mcpd's own user and root"
            )
        has = self.of(whose.uid)
        passed = limits.passed(self.total, has, more)
        if passed == "share":
            user = "the user mcpd cannot name" if whose.uid is None else f"uid {whose.uid}"
            return (
                f"{user} holds {has} bytes of lines not yet ended on its connections, "
                f"and {more} more would pass the {limits.per_uid} one user may hold "
                "(its part as daemon.max_connections_per_uid is of max_connections)"
            )
        if passed == "all":
            return (
                f"the agents' connections hold {self.total} bytes of lines not yet "
                f"ended, and {more} more would pass the {limits.most} all may hold"
            )
        return None

    def change(self, hold: LineHold, weighed: int) -> None:
        """``hold`` holds ``weighed`` bytes past its ``UNWEIGHED`` now."""
        by, uid = weighed - hold.weighed, hold.whose.uid
        hold.weighed = weighed
        if weighed:
            self._holding.add(hold)
        else:
            self._holding.discard(hold)
        self.total += by
        left = self.of(uid) + by
        if left:
            self._by_uid[uid] = left
        else:
            self._by_uid.pop(uid, None)


def _began(hold: LineHold) -> float:
    return hold.began


class LineHold:
    """What one connection's unfinished line holds of ``UnfinishedLines``, since when,
    and what ends the connection when the line is let go to make room for another."""

    __slots__ = ("_lines", "began", "cut_for", "on_cut", "weighed", "whose")

    def __init__(self, lines: UnfinishedLines, whose: LineOwner) -> None:
        self._lines = lines
        self.whose = whose
        self.weighed = 0
        self.began = 0.0  # when its line began (the reader's clock)
        self.cut_for: str | None = None  # why it was let go
        self.on_cut: Callable[[], None] = _nothing  # ends the connection's reading

    @property
    def timeout(self) -> float:
        return self._lines.timeout

    def weigh(self, held: int, began: float) -> str | None:
        """The connection holds ``held`` bytes of a line begun at ``began`` now; why
        they do not fit (None: they do, and are counted)."""
        if self.cut_for is not None:
            return self.cut_for
        self.began = began
        weighed = max(0, held - UNWEIGHED)
        more = weighed - self.weighed
        if more > 0:
            refusal = self._lines.make_room(self, more)
            if refusal is not None:
                return refusal
        if more:
            self._lines.change(self, weighed)
        return None

    def cut(self, why: str) -> None:
        """Let the line go to make room: what it held is given back at once, and the
        connection ends saying ``why``."""
        self.cut_for = why
        self.release()
        self.on_cut()

    def release(self) -> None:
        """The connection ends: what it held is given back."""
        if self.weighed:
            self._lines.change(self, 0)


def _nothing() -> None:
    pass
