"""How many connections the agent sockets hold, and whether one more may be let in.

Connections are counted across the daemon's socket and every profile's, HTTP ones
too, from the moment they are let in until they close:

- everyone together may hold ``max_connections``;
- one user other than mcpd's own and root may hold ``max_connections_per_uid`` of
  them (a quarter by default), so that a user allowed on some socket cannot take
  the places of all the others;
- mcpd's own user and root may hold ``OWNER_RESERVE`` more, so that they can always
  get in (``mcpd status``, ``mcpd reload``) whatever other users hold.

The door (``door``) counts here, and so does a socket-activated mcpd that holds its
socket while its config cannot be loaded (``mcpd.config_hold``).
"""

from __future__ import annotations

import logging
from typing import Final

from protocol.budget import Throttle
from protocol.logfields import log_extra

from ..config.model import DaemonConfig
from .peers import Peer, is_owner

logger = logging.getLogger("mcpd.api")

# Places beyond max_connections that only mcpd's own user and root may take.
OWNER_RESERVE: Final = 16


def uid_quota(d: DaemonConfig) -> int:
    """How many connections one user other than mcpd's own and root may hold."""
    return d.max_connections_per_uid or max(1, d.max_connections // 4)


class Held:
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
    """One admitted connection's place in ``Held``, given back when the ``with``
    block around its service ends."""

    def __init__(self, held: Held, peer: Peer | None, profile: str | None, deadline: float) -> None:
        self._held = held
        self.peer = peer
        self.profile = profile  # the profile it is fixed to (None: it may choose)
        self.deadline = deadline  # by when it must have sent a request (trio time)
        held.take(None if peer is None else peer.uid)

    def __enter__(self) -> Seat:
        return self

    def __exit__(self, *exc: object) -> None:
        self._held.give(None if self.peer is None else self.peer.uid)


class Places:
    """The connections held, and the refusals of one more, logged a few lines at a
    time."""

    def __init__(self) -> None:
        self.held = Held()
        self._full = Throttle(burst=1)  # refused at max_connections
        self._over_quota = Throttle()  # refused at max_connections_per_uid

    def refusal(self, d: DaemonConfig, peer: Peer | None) -> str | None:
        """Why ``peer`` may not have one more connection now (logged), or None."""
        who = "an unknown peer" if peer is None else f"pid {peer.pid}, uid {peer.uid}"
        if is_owner(peer):
            if self.held.total < d.max_connections + OWNER_RESERVE:
                return None
            self._log_full(d, f"{who}, past the {OWNER_RESERVE} kept for mcpd's user and root")
            return (
                f"too many connections (limit {d.max_connections}, and the {OWNER_RESERVE} "
                "kept for mcpd's own user and root are taken too)"
            )
        assert peer is not None  # an unknown peer is taken for the owner
        quota, has = uid_quota(d), self.held.of(peer.uid)
        if has >= quota:
            held = self._over_quota.admit()
            if held is not None:
                logger.warning(
                    "refused an agent connection from uid %d (pid %d): it has %d open, the "
                    "most one user may have (daemon.max_connections_per_uid = %d)%s",
                    peer.uid,
                    peer.pid,
                    has,
                    quota,
                    f" ({held} more refused since the last such line)" if held else "",
                    extra=log_extra(None, reason=f"uid {peer.uid} at its connection limit"),
                )
            return (
                f"uid {peer.uid} has {has} connections to mcpd open, the most one user may "
                f"have (daemon.max_connections_per_uid = {quota})"
            )
        if self.held.total >= d.max_connections:
            self._log_full(d, who)
            return f"too many connections (limit {d.max_connections})"
        return None

    def _log_full(self, d: DaemonConfig, latest: str) -> None:
        held = self._full.admit()
        if held is not None:
            logger.warning(
                "too many agent connections (limit %d): refused %d, the latest from %s",
                d.max_connections,
                held + 1,
                latest,
                extra=log_extra(None, reason="too many connections"),
            )
