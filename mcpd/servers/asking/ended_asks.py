"""Requests of agents' that ended without their server's answer, which the server may
still ask about (``askback``).

A request mcpd gives up on (cancelled by its agent, out of time, its agent or its
connection gone) is over for mcpd at once, but the server reads the cancel only
between its own steps, and until then it may send a request of its own about it. Such
a request must not be handed to whichever agent is still in flight: each ended request
stays a possible cause for a while, by the agent it was of, or until the server
answers it after all (its answer, dropped, says it is done with it).

A server that works on one request at a time, in the order it reads them, is done with
an ended request once it answers one sent after the cancel: its own reply, not a
request mcpd ended itself. A server that works on several at once has only read the
cancel by then: the work it began before may still ask. It shows itself by answering a
request while one sent earlier is still open, and from then on (for what ended earlier
too) only the ended request's own answer, or its grace passing, counts.
"""

from __future__ import annotations

import enum
import math
from typing import Final

import trio

from ..calling.agent_key import AgentKey

# How long an ended request is taken to be one a server's request may be about. Long
# enough for a step of honest work; a server that asks much later about a request it
# was told to stop asks nobody's question.
GRACE: Final = 10.0
# Ended requests remembered per server; past that, the oldest is forgotten, and until
# its grace would have passed no request without a known cause is handed to anyone.
KEPT: Final = 64


class End(enum.Enum):
    """How an agent's request at a server ended, as far as what the server may still
    ask about it: only the server's own reply says it is done with it."""

    # The server replied (a result, its error, a reply mcpd could not pass on): it is
    # done with the request, and has read what came before it.
    ANSWERED = "answered"
    # mcpd ended it after sending it (out of time, cancelled, the connection gone): the
    # server may still be at work on it, and ask about it.
    UNANSWERED = "unanswered"
    # mcpd ended it before it reached the server (refused, busy, no session, cancelled
    # while it waited): the server knows nothing of it.
    UNSENT = "unsent"


class EndedAsks:
    """One server's requests ended lately, oldest first."""

    def __init__(self) -> None:
        # By the request's key in the server's in-flight table: its agent, until when
        # it counts, and where its end came among the server's requests. Each grace is
        # as long, so they pass in the order they began.
        self._ended: dict[object, tuple[object, float, int]] = {}
        self._blind_until = -math.inf
        # The ended requests' keys by their ids at the server, for ``answered``.
        self._by_rid: dict[object, object] = {}
        # The latest place among the server's requests of one it answered: what ended
        # before it is over, for a server that works in order. Kept rather than
        # applied, so that a server seen later to work concurrently loses it.
        self._read_to = 0
        self._in_order = True

    def add(self, key: object, owner: AgentKey, rid: object = None, mark: int = 0) -> None:
        """``owner``'s request ``key`` (``rid`` at the server, when known) ended without
        the server's answer, its end the ``mark``-th step of the server's requests."""
        ended = self._ended
        ended.pop(key, None)
        ended[key] = (owner, trio.current_time() + GRACE, mark)
        if len(ended) > KEPT:
            _, until, _ = ended.pop(next(iter(ended)))
            self._blind_until = max(self._blind_until, until)
        if rid is not None:
            by_rid = self._by_rid
            by_rid[rid] = key
            if len(by_rid) > len(ended):
                self._by_rid = {r: k for r, k in by_rid.items() if k in ended}

    def __bool__(self) -> bool:
        return bool(self._ended)

    def read_past(self, began: int) -> None:
        """The server answered a request that began at step ``began``: it read the
        cancels of the requests that ended before it, so, if it works in order, it is
        done with them."""
        self._read_to = max(self._read_to, began)

    def answered_at(self, began: int, oldest_open: int | None) -> None:
        """The server answered the request that began at step ``began``, while the
        oldest request still open began at ``oldest_open`` (None: none is)."""
        if oldest_open is not None and oldest_open < began:
            self.works_concurrently()
        if self._ended:
            self.read_past(began)

    def works_concurrently(self) -> None:
        """The server answered a request while one sent earlier was still open: an
        answer to a later request no longer says it is done with an ended one."""
        self._in_order = False

    def answered(self, rid: object) -> None:
        """The server answered the ended request ``rid`` after all: it knows the request
        is over, and asks nothing more about it."""
        key = self._by_rid.pop(rid, None)
        if key is not None:
            self._ended.pop(key, None)

    def owners(self) -> set[int] | None:
        """The agents (by id) whose requests ended so lately that the server may ask
        about them; None when mcpd forgot some of those too early to say."""
        now = trio.current_time()
        ended = self._ended
        while ended:
            first = next(iter(ended))
            if ended[first][1] > now:
                break
            del ended[first]
        if len(self._by_rid) > len(ended):
            self._by_rid = {r: k for r, k in self._by_rid.items() if k in ended}
        if self._blind_until > now:
            return None
        read_to = self._read_to if self._in_order else 0
        return {id(owner) for owner, _, mark in ended.values() if mark >= read_to}
