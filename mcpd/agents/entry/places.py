"""How many connections the agent sockets hold, and whether one more may be let in.

Connections are counted across the daemon's socket and every profile's, HTTP ones
too, from the moment they are let in until they close:

- everyone together may hold ``max_connections``;
- one user other than mcpd's own and root may hold ``max_connections_per_uid`` of
  them (a quarter by default), so that a user allowed on some socket cannot take
  the places of all the others;
- mcpd's own user and root may hold ``OWNER_RESERVE`` more on the daemon's own
  socket, so that they can always get in (``mcpd status``, ``mcpd reload``) whatever
  other users hold. On a profile's socket they may not: an agent held to a profile
  there, as the daemon's own user, could otherwise take those places too and keep the
  operator's commands out.

The door (``door``) counts here, and so does a socket-activated mcpd that holds its
socket while its config cannot be loaded (``mcpd.starting.config_hold``). The HTTP endpoint
counts its own connections by the same rules, apart from the sockets'
(``endpoint_places``).
"""

from __future__ import annotations

import logging
from typing import Final

import msgspec

from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra

from ...config.tables.model import DaemonConfig
from .peers import Peer, is_owner

logger = logging.getLogger("mcpd.agents")

# Places beyond max_connections that only mcpd's own user and root may take.
OWNER_RESERVE: Final = 16


def uid_quota(d: DaemonConfig) -> int:
    """How many connections one user other than mcpd's own and root may hold."""
    return d.max_connections_per_uid or max(1, d.max_connections // 4)


class PlacesHeld:
    """The connections the agent sockets hold: all together, and per uid (None: a
    peer the socket cannot name)."""

    def __init__(self) -> None:
        self.total = 0
        self._by_uid: dict[int | None, int] = {}

    def of(self, uid: int | None) -> int:
        return self._by_uid.get(uid, 0)

    def take(self, uid: int | None) -> None:
        self.total += 1
        self._by_uid[uid] = self._by_uid.get(uid, 0) + 1

    def give(self, uid: int | None) -> None:
        self.total -= 1
        left = self._by_uid[uid] - 1
        if left:
            self._by_uid[uid] = left
        else:
            del self._by_uid[uid]


class Seat:
    """One admitted connection's place in ``PlacesHeld``, given back when the ``with``
    block around its service ends."""

    def __init__(
        self, held: PlacesHeld, peer: Peer | None, profile: str | None, deadline: float
    ) -> None:
        self._held = held
        self.peer = peer
        self.profile = profile  # the profile it is fixed to (None: it may choose)
        self.deadline = deadline  # by when it must have sent a request (trio time)
        held.take(None if peer is None else peer.uid)

    def __enter__(self) -> Seat:
        return self

    def __exit__(self, *exc: object) -> None:
        self._held.give(None if self.peer is None else self.peer.uid)


class PlaceLimits(msgspec.Struct, frozen=True):
    """How many connections of one kind may be held at once (and what sets one user's
    share, as a refusal names it)."""

    most: int  # everyone together
    per_uid: int  # one user other than mcpd's own and root
    per_uid_set_by: str


def socket_limits(d: DaemonConfig) -> PlaceLimits:
    """The agent sockets' (and the HTTP endpoint's agents')."""
    quota = uid_quota(d)
    return PlaceLimits(
        d.max_connections,
        quota,
        f"daemon.max_connections_per_uid = {quota}",
    )


class Places:
    """The connections of one kind held, and the refusals of one more, logged a few
    lines at a time."""

    def __init__(self, kind: str = "agent connections") -> None:
        self.held = PlacesHeld()
        self._kind = kind
        self._full = Throttle(burst=1)  # refused at the most everyone may hold
        self._over_quota = Throttle()  # refused at one user's share

    def refusal(
        self, d: DaemonConfig, peer: Peer | None, profile_socket: str | None = None
    ) -> str | None:
        """Why ``peer`` may not have one more connection to a socket now (logged), or
        None. An unknown peer is taken for the owner; ``profile_socket``: the profile
        whose own socket it came to (None: the daemon's), where the owner has no
        reserve."""
        who = "an unknown peer" if peer is None else f"pid {peer.pid}, uid {peer.uid}"
        uid = None if peer is None else peer.uid
        if profile_socket is not None:
            who = f"{who}, on the socket of profile {profile_socket!r}"
        reserve = OWNER_RESERVE if profile_socket is None else 0
        return self.refusal_of(socket_limits(d), uid, is_owner(peer), who, reserve)

    def refusal_of(
        self,
        limits: PlaceLimits,
        uid: int | None,
        owner: bool,
        who: str,
        reserve: int = OWNER_RESERVE,
    ) -> str | None:
        """Why the user ``uid`` (None: one mcpd cannot name), called ``who`` in the log,
        may not have one more connection now (logged), or None; ``owner``: mcpd's own
        user or root, who has no share but ``reserve`` places past the most."""
        if owner:
            if self.held.total < limits.most + reserve:
                return None
            if not reserve:
                self._log_full(limits, who)
                return (
                    f"too many connections (limit {limits.most}; the {OWNER_RESERVE} more "
                    "kept for mcpd's own user and root are on mcpd's own socket, not a "
                    "profile's)"
                )
            self._log_full(limits, f"{who}, past the {reserve} kept for mcpd's user and root")
            return (
                f"too many connections (limit {limits.most}, and the {reserve} "
                "kept for mcpd's own user and root are taken too)"
            )
        has = self.held.of(uid)
        user = "the user mcpd cannot name" if uid is None else f"uid {uid}"
        if has >= limits.per_uid:
            held = self._over_quota.admit()
            if held is not None:
                logger.warning(
                    "refused one more of the %s, to %s: %s has %d open, the most one user "
                    "may have (%s)%s",
                    self._kind,
                    who,
                    user,
                    has,
                    limits.per_uid_set_by,
                    f" ({held} more refused since the last such line)" if held else "",
                    extra=log_extra(None, reason=f"{user} at its connection limit"),
                )
            return (
                f"{user} has {has} connections to mcpd open, the most one user may "
                f"have ({limits.per_uid_set_by})"
            )
        if self.held.total >= limits.most:
            self._log_full(limits, who)
            return f"too many connections (limit {limits.most})"
        return None

    def _log_full(self, limits: PlaceLimits, latest: str) -> None:
        held = self._full.admit()
        if held is not None:
            logger.warning(
                "too many %s (limit %d): refused %d, the latest from %s",
                self._kind,
                limits.most,
                held + 1,
                latest,
                extra=log_extra(None, reason="too many connections"),
            )
