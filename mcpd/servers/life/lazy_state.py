"""What ``start = "lazy"`` adds to a server's state: the calls that keep it running,
and where its runner (``lazy.LazyRunner``) is in starting and stopping it.

Its parts (``server_parts.ServerParts``) read this to say what agents and ``mcpd
status`` see of a lazy server: idle, not down, while it is stopped for want of calls,
and its tools listed as available while it starts on demand.
"""

from __future__ import annotations

import math

import trio

from ...config.tables.servertable import ServerConfig


class Demand:
    """The calls and requests a lazy server has, queued or under way: while it has
    any it is started and kept running (``lazy.LazyRunner`` waits on this)."""

    def __init__(self) -> None:
        self.users = 0
        # Until a call comes, the startup discovery stops the server as soon as it listed.
        self.last_use = -math.inf
        self._changed = trio.Event()

    def begin(self) -> None:
        """A call began: queued, or sent."""
        self.users += 1
        self.touch()

    def end(self) -> None:
        """A call ended: answered, failed, timed out or cancelled."""
        self.users -= 1
        self.last_use = trio.current_time()
        self.touch()

    def touch(self) -> None:
        """Something that keeps the server running changed (a call, a task's hold)."""
        self._changed.set()
        self._changed = trio.Event()

    async def changed(self) -> None:
        """Until the next ``touch``."""
        await self._changed.wait()


class LazyState:
    """A lazy server's demand, and the runner's marks of where its start and stop are."""

    @classmethod
    def of(cls, cfg: ServerConfig) -> LazyState | None:
        """``cfg``'s, if it is started on demand. A server that cannot start (``cfg``
        unresolved) has no idle time to wait out: it is shown down from the start, as
        any other."""
        if cfg.start != "lazy" or cfg.unresolved is not None:
            return None
        return cls(cfg.idle_stop)

    def __init__(self, idle_stop: float) -> None:
        self.idle_stop = idle_stop
        self.demand = Demand()
        self.known = False  # its tools are known (listed once, or saved)
        # Starting again after a start that failed: that start is no longer on demand,
        # and its tools are listed as unavailable until it is up.
        self.retrying = False
        # From the moment mcpd decides to stop it, the server is idle: the next call
        # starts it again, whatever its old process is still doing.
        self.stopping = False
        self.stopped_idle = False

    def listed_available(self, phase: str) -> bool:
        """Whether its tools are shown available whatever its state says: idle, being
        stopped, or started on demand (a call waits for it rather than failing)."""
        if phase == "idle" or self.stopping:
            return True
        return phase == "starting" and self.known and not self.retrying
