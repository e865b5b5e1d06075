"""One configured server, supervised: connect, list, serve calls, fail, back off, retry.

The runner's task owns the server's transport (so the process or connection lives
exactly as long as the task); calls arrive from agents' tasks and go through the
circuit breaker and a bounded concurrency gate before they reach the transport. The
server's parts and its state are ``server_parts.ServerParts``'s, its status row
``status_of``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec
import trio

from protocol.shown.logfields import log_extra
from transports.base import Started, Transport
from transports.errors import Unreachable

from ...config.tables.model import Config
from ...config.tables.servertable import ServerConfig
from ...policy.redaction.guard import SecretGuard
from ...registry.tables.catalog import Catalog
from ..calling.queue_bytes import QueueBytes
from ..connected.upstream import Upstream
from ..oauth import LoginRequired
from ..status.row import ServerRow
from ..status.status_of import status_of
from .events import describe_failure
from .http_kind import other_kind
from .server_parts import ServerParts
from .transport_factory import TransportFactory, open_transport

if TYPE_CHECKING:
    from ..oauth import ServerAuth

logger = logging.getLogger("mcpd.server")


class Runner(ServerParts):
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
        super().__init__(alias, cfg, config, registry, on_change, guard=guard, waiting=waiting)
        self._open_transport = transport_factory
        self._switched = False
        self._ready: tuple[bool, str, int, float | None] = (False, "", 0, None)
        if self.auth is not None:
            # A login that stops working while the server is served is shown at once.
            self.auth.on_change = self._auth_changed

    def status(self) -> ServerRow:
        """Its row in ``mcpd status``."""
        return status_of(self)

    # -- the supervised loop --

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            async with trio.open_nursery() as nursery:
                if self.auth is not None:
                    nursery.start_soon(self._stop_auth_on_stop, self.auth)
                while True:
                    await self._attempt()
                    if self._switched:
                        self._switched = False  # the other transport, right away
                        continue
                    await self.downtime.until_retry()
        finally:
            self.upstream = None
            self.downtime.set_phase("stopped")
            self.scheduler.fail_queued(self.outage())

    @staticmethod
    async def _stop_auth_on_stop(auth: ServerAuth) -> None:
        # Cancelled as soon as the runner is: from then on nothing asks for a token,
        # and the runner ends only once a refresh whose request is out is answered
        # and kept (a server started again would otherwise read the refresh token it
        # replaces). ``stop`` bounds the wait.
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await auth.stop()

    async def _attempt(self) -> None:
        self.attempts += 1
        self.downtime.set_phase("starting")
        # Calls waiting for the first start, and calls in flight, are timed out by the
        # scheduler's timer while the attempt lasts; answers too big to take apart at
        # once are taken apart meanwhile.
        async with trio.open_nursery() as timers:
            timers.start_soon(self.scheduler.run_timer)
            timers.start_soon(self.replies.run)
            try:
                await self._attempt_once()
            finally:
                timers.cancel_scope.cancel()
        # Nobody waits for a server that is down: queued calls get the outage now.
        if not self.waits_for_start():
            self.scheduler.fail_queued(self.outage())

    async def _attempt_once(self) -> None:
        if self.cfg.unresolved is not None:
            self.downtime.cannot_start(self.cfg.unresolved)
            self.first_attempt.set()
            return
        transport: Transport | None = None
        try:
            try:
                cfg = self.cfg
                if self.transport_kind != cfg.kind:
                    cfg = msgspec.structs.replace(cfg, transport=self.transport_kind)
                async with self._open_transport(
                    self.alias, cfg, self.config, self.session.on_notification, self.auth
                ) as transport:
                    self._started(transport.started)
                    # Cleaned, with every secret mcpd holds masked, before any agent sees it.
                    transport.on_request = self.asks.answer
                    transport.on_late_answer = self.asks.answered_late
                    await self._connect_and_serve(transport)
            finally:
                # Before the failure is logged: the outage's journal entry carries this tail.
                self.upstream = None
                self.process = None
                if transport is not None:
                    # Counted already, as each line was logged.
                    tail = [self.guard.mask_quietly(line) for line in transport.stderr_tail()]
                    self.stderr = tail or self.stderr
        except LoginRequired as exc:
            self._login_needed(exc.reason)
        except Exception as exc:
            try:
                other = await other_kind(self.alias, self.cfg, self.transport_kind, exc, self.auth)
            except LoginRequired as login:
                self._login_needed(login.reason)
                return
            if other is not None:
                self.events.switched(self.transport_kind, other)
                self.transport_kind, self._switched = other, True
                return
            failure = describe_failure(exc, self.alias)
            if failure is None:
                raise
            # Its words may quote what the server said (an error, its stderr); its
            # reason, shown in status and the journal, is one line as an outage's is.
            failure = msgspec.structs.replace(
                failure,
                detail=self.guard.text(self.alias, failure.detail, "why it failed"),
                reason=self.kept_reason(failure.reason),
            )
            if failure.event == "internal":
                # A bug in handling one server must not take the daemon (and the others) down.
                logger.exception("%s: unexpected error", self.alias, extra=log_extra(self.alias))
            self.downtime.failed(failure, unreachable=isinstance(exc, Unreachable))
            self.first_attempt.set()

    def _started(self, started: Started | None) -> None:
        self.process = started
        self.unprotected = started.unprotected if started is not None else None
        if self.unprotected is not None:
            self.events.event(
                logging.WARNING,
                "unprotected",
                f"runs without part of its sandbox: {self.unprotected}",
                self.unprotected,
            )

    def _auth_changed(self) -> None:
        self.wake()
        auth = self.auth
        if auth is not None and auth.needs_login is not None and self.phase == "connected":
            # Shown at once; the serve loop then ends the session.
            self._login_needed(auth.needs_login)

    def _login_needed(self, reason: str) -> None:
        self.downtime.login_needed(reason)
        self.first_attempt.set()

    async def _connect_and_serve(self, transport: Transport) -> None:
        up, listing = await self.session.open(
            transport,
            http=self.transport_kind == "http",
            settings=self.config.daemon,
            limits=self.config.list_limits(self.alias),
        )
        self.tool_list.listed(listing)
        self.tool_list.connected()
        self.registry.update(self.alias, listing.tools, trusted=self.cfg.trusted)
        # Its instructions are judged as its lists are: first seen before the
        # approval, or a change held against it.
        self.registry.gate.instructions(self.alias, up.instructions)
        # Everything listed once: unless new servers are held, that is the approval of
        # the server, and what it lists from now on is judged against it.
        self.registry.gate.settle(self.alias)
        self.upstream = up
        self.policy.on_start(trio.current_time())
        # Connecting and listing worked: the server is there, which says nothing of
        # its calls. A circuit open as its probe could not connect closes on trial:
        # the next call decides; any other stays open for its probe to decide.
        now = trio.current_time()
        self.breaker.record_heard(now)
        was_down = self.downtime.back_up()
        st = self.breaker.status(now)
        held = None if st.state == "closed" else st.retry_at or now
        self._ready = (was_down, f"{up.era} era ({up.version})", len(listing.tools), held)
        await self._serve(up, transport)

    def _now_ready(self) -> None:
        """Connected and listed, and (legacy HTTP) its push stream answered: calls go."""
        self.downtime.set_phase("connected")
        self.first_attempt.set()
        self.events.connected(*self._ready)

    async def _serve(self, up: Upstream, transport: Transport) -> None:
        await self.session.serve(up, transport, self._now_ready)
