"""How many bytes of request bodies the daemon's HTTP side holds at once: the agent
sockets' HTTP connections and the endpoint's together, from the first byte of a body
until its request has been answered.

Each body is capped (``body_size.MAX_BODY``), but a client may send a request's head
and most of its body and hold it there, on as many connections as it has places.
The bytes held are shared out as the places are (``places``), by the rule the
agent sockets' unfinished lines follow too (``entry.shares``):

- everyone together may hold ``BODY_BUDGET``;
- one user other than mcpd's own and root the part of it that
  ``max_connections_per_uid`` is of ``max_connections`` (a full body at least);
- mcpd's own user and root that much more as ``OWNER_RESERVE`` is of
  ``max_connections``, so that they can always send one.

A body with its length in its headers is weighed before a byte of it is read; one
sent in chunks, as it comes. One that does not fit is refused with 503 and the
reason, rather than made to wait: its client can tell it and try again, where a
wait would hold its connection on bytes of others it cannot see. A
``subscriptions/listen`` holds its body for as long as it listens, so that body is
capped lower (``check_listen``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import msgspec

from protocol.jsonrpc import messages as rpc
from protocol.pacing.buckets import Throttle
from protocol.shown.logfields import log_extra

from ...config.tables.model import DaemonConfig
from ..entry.peers import is_owner, owners_uid
from ..entry.shares import ByteShares, byte_shares
from .body_size import MAX_BODY
from .exchange import RequestSender
from .mcp_http import rpc_reject
from .wire import Reject

logger = logging.getLogger("mcpd.http")

BODY_BUDGET: Final = 16 * MAX_BODY


class BodyOwner(msgspec.Struct, frozen=True):
    """Whose a body is: its user (None: one mcpd cannot name), and whether that is
    mcpd's own user or root."""

    uid: int | None
    owner: bool


def body_owner(caller: RequestSender) -> BodyOwner:
    """Whose a request's body is: the socket peer's user, or on the endpoint the user
    holding the other end (``endpoint_places`` counts the same)."""
    if caller.guard is None:
        return BodyOwner(None if caller.peer is None else caller.peer.uid, is_owner(caller.peer))
    holder = None if caller.identity is None else caller.identity.holder
    uid = None if holder is None else holder.uid
    return BodyOwner(uid, owners_uid(uid))


def body_limits(d: DaemonConfig) -> ByteShares:
    return byte_shares(d, BODY_BUDGET, MAX_BODY)


class BodyBudget:
    """The bytes of request bodies held, all together and per user."""

    def __init__(self) -> None:
        self.total = 0
        self._by_uid: dict[int | None, int] = {}
        self._refused = Throttle()

    def of(self, uid: int | None) -> int:
        return self._by_uid.get(uid, 0)

    @contextmanager
    def claim(self, d: DaemonConfig) -> Iterator[BodyClaim]:
        """Room for one request's body while the ``with`` block runs, given back at
        its end."""
        claim = BodyClaim(self, d)
        try:
            yield claim
        finally:
            if claim.whose is not None:
                self._give(claim.whose.uid, claim.size)

    def take(self, d: DaemonConfig, whose: BodyOwner, size: int) -> None:
        """Hold ``size`` more bytes of ``whose``; raises Reject (503, saying why) when
        they do not fit."""
        limits = body_limits(d)
        refusal = self._refusal(limits, whose, size)
        if refusal is not None:
            held = self._refused.admit()
            if held is not None:
                more = f" ({held} more since the last such line)" if held else ""
                logger.warning(
                    "refused a request body over HTTP: %s%s",
                    refusal,
                    more,
                    extra=log_extra(None, reason="request bodies at their limit"),
                )
            body = msgspec.json.encode({"error": f"mcpd is busy: {refusal}"})
            raise Reject(503, body, [(b"retry-after", b"1")])
        self.total += size
        self._by_uid[whose.uid] = self.of(whose.uid) + size

    def _refusal(self, limits: ByteShares, whose: BodyOwner, size: int) -> str | None:
        if whose.owner:
            if self.total + size <= limits.most + limits.reserve:
                return None
            return (
                f"request bodies of {self.total} bytes are being received or served, and "
                f"one more of {size} would pass the {limits.most} all may hold and the "
                f"{limits.reserve} kept for mcpd's own user and root"
            )
        has = self.of(whose.uid)
        passed = limits.passed(self.total, has, size)
        if passed == "share":
            user = "the user mcpd cannot name" if whose.uid is None else f"uid {whose.uid}"
            return (
                f"{user} has request bodies of {has} bytes being received or served, and "
                f"one more of {size} would pass the {limits.per_uid} one user may hold "
                "(its part as daemon.max_connections_per_uid is of max_connections)"
            )
        if passed == "all":
            return (
                f"request bodies of {self.total} bytes are being received or served, and "
                f"one more of {size} would pass the {limits.most} all may hold"
            )
        return None

    def _give(self, uid: int | None, size: int) -> None:
        if not size:
            return
        self.total -= size
        left = self._by_uid[uid] - size
        if left:
            self._by_uid[uid] = left
        else:
            del self._by_uid[uid]


class BodyClaim:
    """What one request's body holds of the budget."""

    def __init__(self, budget: BodyBudget, d: DaemonConfig) -> None:
        self._budget = budget
        self._d = d
        self.whose: BodyOwner | None = None
        self.size = 0

    def take(self, whose: BodyOwner, size: int) -> None:
        """Hold ``size`` more bytes of the body ``whose`` sends (Reject with 503 when
        they do not fit)."""
        self._budget.take(self._d, whose, size)
        self.whose = whose
        self.size += size


# A listen is answered only when it ends, and its body is held, and counted against the
# request bodies' bound, for as long as it runs: it may hold no more than a request of
# its kind is ever written in.
LISTEN_BODY: Final = 64 * 1024


def check_listen(req: rpc.Request, body: bytes) -> None:
    if req.method == "subscriptions/listen" and len(body) > LISTEN_BODY:
        raise rpc_reject(
            413,
            req.id,
            rpc.INVALID_REQUEST,
            f"a subscriptions/listen is held open for as long as it listens, so its body "
            f"may be at most {LISTEN_BODY} bytes; this one has {len(body)}",
        )
