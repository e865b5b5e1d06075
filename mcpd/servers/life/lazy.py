"""``start = "lazy"``: a stdio server that runs only while it is being used.

Its tools are known without it running: from the state file of an earlier run, or
from one discovery at startup (start, list, stop). The first call starts it; after
``idle_stop`` seconds without calls, and with no task of an agent's running on it
(``task_holds``), it is stopped again. Both are invisible to agents except for the
latency of a start: while idle or starting on demand its tools stay listed as
available, and a call waits for the server instead of failing. A start that fails is
an outage like any other, with backoff and the tools marked unavailable.
"""

from __future__ import annotations

import logging
import math

import trio

from transports.base import Transport
from transports.errors import single_exceptions

from ..connected.upstream import Upstream
from .lazy_state import LazyState
from .runner import Runner
from .server_parts import ServerParts
from .task_holds import TaskHolds
from .transport_factory import TransportFactory, open_transport


def runner_of(parts: ServerParts, transport_factory: TransportFactory = open_transport) -> Runner:
    """The runner of the server ``parts`` are of: this one, if it starts on demand."""
    lazy = parts.lazy
    if lazy is None:
        return Runner(parts, transport_factory)
    return LazyRunner(parts, lazy, transport_factory)


class LazyRunner(Runner):
    """A runner of another loop around the same attempt: it starts the server only
    once a call wants it, and stops it again once it has none. What agents and
    ``mcpd status`` see of that is its parts', which read ``lazy`` (its state)."""

    def __init__(
        self,
        parts: ServerParts,
        lazy: LazyState,
        transport_factory: TransportFactory = open_transport,
    ) -> None:
        super().__init__(parts, transport_factory)
        self.lazy = lazy

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        p, lazy = self.parts, self.lazy
        lazy.known = p.registry.raw_tools(p.alias) is not None
        try:
            while True:
                if lazy.known and not lazy.demand.users:
                    p.downtime.set_phase("idle")
                    p.first_attempt.set()
                    while not lazy.demand.users:
                        await lazy.demand.changed()
                await self._run_until_idle()
        finally:
            lazy.stopping = False
            p.upstream = None
            p.downtime.set_phase("stopped")

    async def _run_until_idle(self) -> None:
        lazy = self.lazy
        lazy.retrying = False
        while True:
            lazy.stopped_idle = False
            await self._attempt()
            if lazy.stopped_idle:
                lazy.stopping = False
                return
            lazy.retrying = True
            await self.parts.downtime.until_retry()

    async def _serve(self, up: Upstream, transport: Transport) -> None:
        lazy = self.lazy
        lazy.known = True
        lazy.retrying = False
        with single_exceptions():
            async with trio.open_nursery() as nursery:
                serving = trio.CancelScope()
                up.mark.holds.on_end = lazy.demand.touch
                nursery.start_soon(self._stop_when_idle, serving, up.mark.holds)
                with serving:
                    await super()._serve(up, transport)
                nursery.cancel_scope.cancel()
        # The serve loop ends only by raising, or by the idle stop cancelling it.
        lazy.stopped_idle = True

    async def _stop_when_idle(self, serving: trio.CancelScope, holds: TaskHolds) -> None:
        p, lazy = self.parts, self.lazy
        demand = lazy.demand
        while True:
            if demand.users:
                deadline = math.inf
            else:
                # A task running there holds it too: stopping it would end the task.
                deadline = max(demand.last_use + lazy.idle_stop, holds.until(lazy.idle_stop))
                if trio.current_time() >= deadline:
                    break
            with trio.move_on_at(deadline):
                await demand.changed()
        # From here calls wait for the next start instead of using this process.
        lazy.stopping = True
        p.upstream = None
        p.scheduler.detach()
        if demand.last_use > -math.inf:
            said = f"stopping after {lazy.idle_stop:g} s without calls"
            p.events.event(logging.INFO, "idle_stop", said)
        serving.cancel()
