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
from collections.abc import Callable

import msgspec
import trio

from transports.base import Transport
from transports.errors import single_exceptions

from ...config.tables.model import Config
from ...config.tables.servertable import ServerConfig
from ...policy.redaction.guard import SecretGuard
from ...registry.tables.catalog import Catalog
from ..calling.calls import Demand
from ..calling.queue_bytes import QueueBytes
from ..connected.upstream import Upstream
from ..status.row import ServerRow
from .runner import Runner
from .task_holds import TaskHolds
from .transport_factory import TransportFactory, open_transport


class LazyRunner(Runner):
    def __init__(
        self,
        alias: str,
        cfg: ServerConfig,
        config: Config,
        registry: Catalog,
        on_change: Callable[[str], None],
        transport_factory: TransportFactory = open_transport,
        *,
        guard: SecretGuard | None = None,
        waiting: QueueBytes | None = None,
    ) -> None:
        super().__init__(
            alias, cfg, config, registry, on_change, transport_factory, guard=guard, waiting=waiting
        )
        self.idle_stop = cfg.idle_stop
        self.demand = Demand()
        self._known = False  # the tools are known (listed once, or saved)
        # Starting again after a start that failed: that start is no longer on demand,
        # and its tools are listed as unavailable until it is up.
        self._retrying = False
        self._stopping = False
        self._stopped_idle = False
        self.scheduler.demand = self.demand  # its calls start it, and keep it running

    @property
    def state(self) -> str:
        # From the moment mcpd decides to stop it, the server is idle: the next call
        # starts it again, whatever its old process is still doing.
        return "idle" if self._stopping else super().state

    @property
    def available(self) -> bool:
        if self.phase == "idle" or self._stopping:
            return True
        if self.phase == "starting" and self._known and not self._retrying:
            return True  # started on demand: a call waits for it rather than failing
        return super().available

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        self._known = self.registry.raw_tools(self.alias) is not None
        try:
            while True:
                if self._known and not self.demand.users:
                    self.downtime.set_phase("idle")
                    self.first_attempt.set()
                    while not self.demand.users:
                        await self.demand.changed()
                await self._run_until_idle()
        finally:
            self._stopping = False
            self.upstream = None
            self.downtime.set_phase("stopped")

    async def _run_until_idle(self) -> None:
        self._retrying = False
        while True:
            self._stopped_idle = False
            await self._attempt()
            if self._stopped_idle:
                self._stopping = False
                return
            self._retrying = True
            await self.downtime.until_retry()

    async def _serve(self, up: Upstream, transport: Transport) -> None:
        self._known = True
        self._retrying = False
        with single_exceptions():
            async with trio.open_nursery() as nursery:
                serving = trio.CancelScope()
                up.mark.holds.on_end = self.demand.touch
                nursery.start_soon(self._stop_when_idle, serving, up.mark.holds)
                with serving:
                    await super()._serve(up, transport)
                nursery.cancel_scope.cancel()
        # The serve loop ends only by raising, or by the idle stop cancelling it.
        self._stopped_idle = True

    async def _stop_when_idle(self, serving: trio.CancelScope, holds: TaskHolds) -> None:
        while True:
            demand = self.demand
            if demand.users:
                deadline = math.inf
            else:
                # A task running there holds it too: stopping it would end the task.
                deadline = max(demand.last_use + self.idle_stop, holds.until(self.idle_stop))
                if trio.current_time() >= deadline:
                    break
            with trio.move_on_at(deadline):
                await demand.changed()
        # From here calls wait for the next start instead of using this process.
        self._stopping = True
        self.upstream = None
        self.scheduler.detach()
        if self.demand.last_use > -math.inf:
            self._log(
                logging.INFO, "idle_stop", f"stopping after {self.idle_stop:g} s without calls"
            )
        serving.cancel()

    def waits_for_start(self) -> bool:
        # Idle, being stopped (its phase still says connected until the stop is done),
        # or started on demand: the call waits for the server.
        return (self.phase != "connected" or self._stopping) and self.available

    def status(self) -> ServerRow:
        return msgspec.structs.replace(super().status(), start="lazy", idle_stop=self.idle_stop)
