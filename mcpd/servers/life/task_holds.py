"""The tasks still running at a server in one session, as mcpd last heard of them.

A lazy server (``lazy``) is not idle while one runs: stopping it ends the session, and
the task with it, before its agent could read the result. A task is let go of once
mcpd hears it ended (completed, failed or cancelled), or once no agent can read it any
more. One mcpd hears nothing of is not held for ever: the server may have dropped it
silently, or its agent lost interest. It is held for the server's idle time after the
last word of it (a handle, an answer about it, a status notification), the same quiet
time that stops a server with no calls; and at least for the ttl the server gave it
when it was made, as the server keeps the task, and its result, that long for an agent
that comes back for it. A ttl past ``MAX_TTL_HOLD`` counts as that much: a server's own
word is no reason to keep its process up without end.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

import trio

MAX_TTL_HOLD: Final = 3600.0  # seconds


class _Held:
    __slots__ = ("heard", "kept_until")

    def __init__(self, heard: float, kept_until: float) -> None:
        self.heard = heard  # when mcpd last heard it still runs
        self.kept_until = kept_until  # its ttl from when it was made ran out then


class TaskHolds:
    __slots__ = ("_held", "on_end")

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}  # by the server's id for the task
        # Told as a task is let go of, as the server may be idle sooner then.
        self.on_end: Callable[[], None] | None = None

    def made(self, server_id: str, ttl: float) -> None:
        """The server made the task ``server_id``, to keep for ``ttl`` seconds (0:
        it said no ttl, or one mcpd could not read)."""
        now = trio.current_time()
        self._held[server_id] = _Held(now, now + min(ttl, MAX_TTL_HOLD))

    def runs(self, server_id: str) -> None:
        """mcpd heard the task ``server_id`` still runs."""
        held = self._held.get(server_id)
        if held is not None:
            held.heard = trio.current_time()

    def ended(self, server_id: str) -> None:
        """The task ``server_id`` ended, or no agent can read it any more."""
        if self._held.pop(server_id, None) is not None and self.on_end is not None:
            self.on_end()

    def clear(self) -> None:
        """The session ended, and every task of it with it."""
        self._held.clear()
        self.on_end = None

    def until(self, quiet: float) -> float:
        """When the last task held stops holding the server, with ``quiet`` seconds
        its idle time (-inf: none holds it)."""
        ends = (max(held.heard + quiet, held.kept_until) for held in self._held.values())
        return max(ends, default=-math.inf)
