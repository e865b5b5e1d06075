"""What a modern server's one ``subscriptions/listen`` names of the URIs agents hold,
and what the server took of it.

The listen is the server's for every agent, so a URI the server refuses (one it does
not have, or one past what it will hold) must not cost the others their updates. A
refused listen is blamed on the URIs it named that no listen the server acknowledged
named: one of them alone is refused for good, and named no more while agents hold it;
more are halved, the second half set aside, and tried once a listen without it is
acknowledged (the half set aside last first). k bad URIs among n new ones cost about
2·k·log2(n) listens. A refusal that names no new URI is not a URI's doing: the listen is
sent again as it was, later (the caller's backoff).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any, Literal

import msgspec
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.lines.json_values import parts_at_most
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote

from ..results.taking_apart import AT_ONCE_PARTS

logger = logging.getLogger("mcpd.server")
Then = Literal["at once", "spaced", "backoff"]  # when a refused listen is sent again


class _Acknowledged(msgspec.Struct):
    notifications: dict[str, Any]


def honoured(params: Raw | None) -> dict[str, Any]:
    """What an acknowledgement of mcpd's listen says the server honours: nothing when
    it holds more values than are read at once (``taking_apart``), which no answer
    to what mcpd asked needs."""
    if params is not None and parts_at_most(params, AT_ONCE_PARTS) > AT_ONCE_PARTS:
        return {}
    try:
        return rpc.decode_as(params, _Acknowledged).notifications
    except rpc.InvalidParams:
        return {}


class ListenedURIs:
    """Which subscribed URIs the next listen names, learning from what the server
    acknowledges and refuses (one server's, one session's)."""

    def __init__(self) -> None:
        self.refused: set[str] = set()  # refused alone: named no more while held
        # Suspected halves waiting for their trial, the last set aside tried first.
        self._set_aside: list[set[str]] = []
        self._named: frozenset[str] = frozenset()  # by the listen in force
        self._accepted: frozenset[str] = frozenset()  # by the last one acknowledged

    def naming(self, subscribed: Collection[str]) -> list[str]:
        """The URIs the listen about to be sent names, of those ``subscribed``."""
        self._named = frozenset(subscribed) - self.refused - set().union(*self._set_aside)
        return sorted(self._named)

    def acknowledged(self) -> bool:
        """The server took up the listen in force; whether URIs set aside wait to be
        tried (the listen is then sent again, with the half set aside last)."""
        self._accepted = self._named
        if self._set_aside:
            self._set_aside.pop()
            return True
        return False

    def refusal(self, alias: str, exc: rpc.RPCError, delay: float) -> Then:
        """The server refused the listen in force: when to send it again. At once,
        without the one URI refused for good (the listen refused was in force for no
        agent, and a URI named anew is refused once a listen); once the listens'
        spacing allows, with half of several URIs it had not taken; after ``delay``,
        as it was, when it named no such URI. Logged, naming a URI refused."""
        suspects = sorted(self._named - self._accepted)
        then: Then
        if len(suspects) == 1:
            self.refused.update(suspects)
            then, told = "at once", f"listening again without {quote(suspects[0])}"
        elif suspects:
            self._set_aside.append(set(suspects[len(suspects) // 2 :]))
            then = "spaced"
            told = "listening again with half the URIs it had not taken, to find which"
        else:
            then, told = "backoff", f"relying on ttl, listening again in {delay:g} s"
        reason = quote(exc.message)
        logger.info(
            "%s: subscriptions/listen refused (%s); %s",
            alias,
            reason,
            told,
            extra=log_extra(alias, reason=reason),
        )
        return then

    def let_go(self, uri: str) -> None:
        """No agent holds ``uri`` any more: subscribed again, it is tried again."""
        self.refused.discard(uri)
        for half in self._set_aside:
            half.discard(uri)

    def listed_anew(self) -> bool:
        """The server's resources changed: what it refused it may have now (whether
        it refused any, which the listen is then sent again to name)."""
        refused = bool(self.refused)
        self.refused.clear()
        return refused

    def session_began(self) -> None:
        self.refused.clear()
        self._set_aside.clear()
        self._named = self._accepted = frozenset()
