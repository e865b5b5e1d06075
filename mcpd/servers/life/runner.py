"""One configured server, supervised: connect, list, serve calls, fail, back off, retry.

The runner's task owns the server's transport (so the process or connection lives
exactly as long as the task); calls arrive from agents' tasks and go through the
circuit breaker and a bounded concurrency gate before they reach the transport. The
runner has the server's parts (``server_parts.ServerParts``), which hold its state
and are what the rest of mcpd holds of it; it keeps what they say of the server up
to date as it starts, serves, fails and backs off.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import msgspec
import trio

from protocol.shown.logfields import log_extra
from transports.base import Started, Transport
from transports.errors import Unreachable

from ..connected.upstream import Upstream
from ..oauth import LoginRequired
from .events import describe_failure
from .http_kind import other_kind
from .server_parts import ServerParts
from .transport_factory import TransportFactory, open_transport

if TYPE_CHECKING:
    from ..oauth import ServerAuth

logger = logging.getLogger("mcpd.server")


class Runner:
    """The task that runs one server: its parts are what it starts, serves and stops,
    and what the rest of mcpd reads of the server meanwhile."""

    def __init__(
        self, parts: ServerParts, transport_factory: TransportFactory = open_transport
    ) -> None:
        self.parts = parts
        self._open_transport = transport_factory
        self._switched = False
        self._ready: tuple[bool, str, int, float | None] = (False, "", 0, None)
        if parts.auth is not None:
            # A login that stops working while the server is served is shown at once.
            parts.auth.on_change = self._auth_changed

    # -- the supervised loop --

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        p = self.parts
        task_status.started()
        try:
            async with trio.open_nursery() as nursery:
                if p.auth is not None:
                    nursery.start_soon(self._stop_auth_on_stop, p.auth)
                while True:
                    await self._attempt()
                    if self._switched:
                        self._switched = False  # the other transport, right away
                        continue
                    await p.downtime.until_retry()
        finally:
            p.upstream = None
            p.downtime.set_phase("stopped")
            p.scheduler.fail_queued(p.outage())

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
        p = self.parts
        p.attempts += 1
        p.downtime.set_phase("starting")
        # Calls waiting for the first start, and calls in flight, are timed out by the
        # scheduler's timer while the attempt lasts; answers too big to take apart at
        # once are taken apart meanwhile.
        async with trio.open_nursery() as timers:
            timers.start_soon(p.scheduler.run_timer)
            timers.start_soon(p.replies.run)
            try:
                await self._attempt_once()
            finally:
                timers.cancel_scope.cancel()
        # Nobody waits for a server that is down: queued calls get the outage now.
        if not p.waits_for_start():
            p.scheduler.fail_queued(p.outage())

    async def _attempt_once(self) -> None:
        p = self.parts
        if p.cfg.unresolved is not None:
            p.downtime.cannot_start(p.cfg.unresolved)
            p.first_attempt.set()
            return
        transport: Transport | None = None
        try:
            try:
                cfg = p.cfg
                if p.transport_kind != cfg.kind:
                    cfg = msgspec.structs.replace(cfg, transport=p.transport_kind)
                async with self._open_transport(
                    p.alias, cfg, p.config, p.session.on_notification, p.auth
                ) as transport:
                    self._started(transport.started)
                    # Cleaned, with every secret mcpd holds masked, before any agent sees it.
                    transport.on_request = p.asks.answer
                    transport.on_late_answer = p.asks.answered_late
                    await self._connect_and_serve(transport)
            finally:
                # Before the failure is logged: the outage's journal entry carries this tail.
                p.upstream = None
                p.process = None
                if transport is not None:
                    # Counted already, as each line was logged.
                    tail = [p.guard.mask_quietly(line) for line in transport.stderr_tail()]
                    p.stderr = tail or p.stderr
        except LoginRequired as exc:
            self._login_needed(exc.reason)
        except Exception as exc:
            try:
                other = await other_kind(p.alias, p.cfg, p.transport_kind, exc, p.auth)
            except LoginRequired as login:
                self._login_needed(login.reason)
                return
            if other is not None:
                p.events.switched(p.transport_kind, other)
                p.transport_kind, self._switched = other, True
                return
            failure = describe_failure(exc, p.alias)
            if failure is None:
                raise
            # Its words may quote what the server said (an error, its stderr); its
            # reason, shown in status and the journal, is one line as an outage's is.
            failure = msgspec.structs.replace(
                failure,
                detail=p.guard.text(p.alias, failure.detail, "why it failed"),
                reason=p.kept_reason(failure.reason),
            )
            if failure.event == "internal":
                # A bug in handling one server must not take the daemon (and the others) down.
                logger.exception("%s: unexpected error", p.alias, extra=log_extra(p.alias))
            p.downtime.failed(failure, unreachable=isinstance(exc, Unreachable))
            p.first_attempt.set()

    def _started(self, started: Started | None) -> None:
        p = self.parts
        p.process = started
        p.unprotected = started.unprotected if started is not None else None
        if p.unprotected is not None:
            p.events.event(
                logging.WARNING,
                "unprotected",
                f"runs without part of its sandbox: {p.unprotected}",
                p.unprotected,
            )

    def _auth_changed(self) -> None:
        p = self.parts
        p.wake()
        auth = p.auth
        if auth is not None and auth.needs_login is not None and p.phase == "connected":
            # Shown at once; the serve loop then ends the session.
            self._login_needed(auth.needs_login)

    def _login_needed(self, reason: str) -> None:
        self.parts.downtime.login_needed(reason)
        self.parts.first_attempt.set()

    async def _connect_and_serve(self, transport: Transport) -> None:
        p = self.parts
        up, listing = await p.session.open(
            transport,
            http=p.transport_kind == "http",
            settings=p.config.daemon,
            limits=p.config.list_limits(p.alias),
        )
        p.tool_list.listed(listing)
        p.tool_list.connected()
        p.registry.update(p.alias, listing.tools, trusted=p.cfg.trusted)
        # Its instructions are judged as its lists are: first seen before the
        # approval, or a change held against it.
        p.registry.gate.instructions(p.alias, up.instructions)
        # Everything listed once: unless new servers are held, that is the approval of
        # the server, and what it lists from now on is judged against it.
        p.registry.gate.settle(p.alias)
        p.upstream = up
        p.policy.on_start(trio.current_time())
        # Connecting and listing worked: the server is there, which says nothing of
        # its calls. A circuit open as its probe could not connect closes on trial:
        # the next call decides; any other stays open for its probe to decide.
        now = trio.current_time()
        p.breaker.record_heard(now)
        was_down = p.downtime.back_up()
        st = p.breaker.status(now)
        held = None if st.state == "closed" else st.retry_at or now
        self._ready = (was_down, f"{up.era} era ({up.version})", len(listing.tools), held)
        await self._serve(up, transport)

    def _now_ready(self) -> None:
        """Connected and listed, and (legacy HTTP) its push stream answered: calls go."""
        p = self.parts
        p.downtime.set_phase("connected")
        p.first_attempt.set()
        p.events.connected(*self._ready)

    async def _serve(self, up: Upstream, transport: Transport) -> None:
        await self.parts.session.serve(up, transport, self._now_ready)
