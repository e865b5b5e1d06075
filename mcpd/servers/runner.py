"""One configured server, supervised: connect, list, serve calls, fail, back off, retry.

The runner's task owns the server's transport (so the process or connection lives
exactly as long as the task); calls arrive from agents' tasks and go through the
circuit breaker and a bounded concurrency gate before they reach the transport.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable
from typing import Any, Final

import trio
from msgspec import Raw

from protocol import jsonrpc as rpc
from protocol import mcp
from protocol.logfields import log_extra
from transports.base import (
    SpawnError,
    Transport,
    TransportError,
    single_exceptions,
)

from ..config.model import Config, DaemonConfig, ServerConfig
from ..registry.table import Registry
from .backoff import BackoffConfig, RestartPolicy
from .breaker import Breaker, BreakerConfig, Transition
from .calls import CallScheduler, Done, Outcome, PendingCall
from .listing import ListKeeper
from .outage import Outage, clock_time
from .progress import Deliver, ProgressRoutes
from .stats import LatencyStats
from .transport_factory import TransportFactory, open_transport
from .upstream import Upstream

logger = logging.getLogger("mcpd.server")

_REMINDER_EVERY: Final = 300.0
_LIVENESS_TIMEOUT: Final = 5.0


class CallRefused(Exception):
    def __init__(self, outage: Outage) -> None:
        super().__init__(outage.reason)
        self.outage = outage


class Runner:
    def __init__(
        self,
        alias: str,
        cfg: ServerConfig,
        config: Config,
        registry: Registry,
        on_change: Callable[[str], None],
        transport_factory: TransportFactory = open_transport,
    ) -> None:
        d = config.daemon
        self.alias = alias
        self.cfg = cfg
        self.config = config
        self.registry = registry
        self._on_change = on_change
        self._open_transport = transport_factory
        self.transport_kind = cfg.transport
        self.breaker = Breaker(
            BreakerConfig(
                failure_threshold=d.failure_threshold,
                cooldown_base=d.cooldown_base,
                cooldown_cap=d.cooldown_cap,
                probe_timeout=config.call_timeout(alias) + _LIVENESS_TIMEOUT,
            ),
            on_transition=self._on_breaker,
        )
        self.policy = RestartPolicy(
            BackoffConfig(
                base=d.backoff_base,
                cap=d.backoff_cap,
                max_restarts=d.max_restarts,
                window=d.crash_window,
                stable_after=d.stable_after,
            )
        )
        self.stats = LatencyStats()
        self.scheduler = CallScheduler(self, cfg.concurrency())
        self.upstream: Upstream | None = None
        self.phase = "starting"
        self.last_error: str | None = None
        self.since = trio.current_time()
        self.down_since: float | None = None
        self.retry_at: float | None = None
        self.stderr: list[str] = []
        self.first_attempt = trio.Event()
        self._era_hint = cfg.era
        self._wake = trio.Event()
        self._suspect = False
        self._health_at = math.inf
        self._closed = False
        self._last_log = -math.inf
        self.progress = ProgressRoutes(f"mcpd-{alias}-")
        self.lists = ListKeeper(alias, self.wake, self._is_connected, self._install)

    # -- state shown to people and models --

    @property
    def state(self) -> str:
        if self.phase == "connected":
            b = self.breaker.poll(trio.current_time())
            if b != "closed":
                return b
            return (
                "degraded"
                if self.breaker.status(trio.current_time()).consecutive_failures
                else "ready"
            )
        if self.phase == "waiting":
            return "crash_loop" if self.policy.in_crash_loop else "failed"
        return self.phase

    def outage(self) -> Outage:
        state = self.state
        if state in ("open", "half_open"):
            st = self.breaker.status(trio.current_time())
            return Outage(
                self.alias, state, st.reason or "too many failures", st.since, st.retry_at
            )
        if state == "starting":
            reason = (
                f"still starting (last error: {self.last_error})"
                if self.last_error
                else "still starting"
            )
            return Outage(self.alias, state, reason, self.down_since, self.retry_at)
        if state == "stopped":
            return Outage(self.alias, state, self.last_error or "stopped", self.down_since)
        return Outage(
            self.alias, state, self.last_error or "not running", self.down_since, self.retry_at
        )

    def _set_phase(self, phase: str, error: str | None = None) -> None:
        now = trio.current_time()
        if error is not None:
            self.last_error = error
        if phase != self.phase:
            self.phase = phase
            self.since = now
        self._publish()

    @property
    def available(self) -> bool:
        """Whether calls can be expected to work (the tools are listed as available)."""
        return self.state in ("ready", "degraded")

    def _publish(self) -> None:
        available = self.available
        if available:
            self.registry.set_availability(self.alias, True)
        else:
            self.registry.set_availability(self.alias, False, self.outage().marker())
        self._on_change(self.alias)

    def _log(self, level: int, event: str, message: str, reason: str | None = None) -> None:
        self._last_log = trio.current_time()
        logger.log(
            level,
            "%s",
            message,
            extra=log_extra(
                self.alias,
                event,
                reason,
                self.stderr if event in ("outage", "crash_loop", "spawn_failed") else None,
            ),
        )

    def _on_breaker(self, t: Transition) -> None:
        if t.new == "open":
            self._log(
                logging.WARNING,
                "breaker_open",
                f"circuit open after failures ({t.reason}); next probe at {clock_time(t.retry_at)}",
                t.reason,
            )
        elif t.new == "half_open":
            self._log(logging.INFO, "breaker_half_open", "circuit half-open, probing")
        elif t.new == "closed":
            self._log(logging.INFO, "recovered", "circuit closed, server answering again")
        self._wake.set()

    # -- the supervised loop --

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                await self._attempt()
                await self._back_off()
        finally:
            self.upstream = None
            self._set_phase("stopped", self.last_error)
            self.scheduler.fail_queued(self.outage())

    async def _attempt(self) -> None:
        self._set_phase("starting")
        # Calls waiting for the first start, and calls in flight, are timed out by the
        # scheduler's timer while the attempt lasts.
        async with trio.open_nursery() as timers:
            timers.start_soon(self.scheduler.run_timer)
            try:
                await self._attempt_once()
            finally:
                timers.cancel_scope.cancel()
        # Nobody waits for a server that is down: queued calls get the outage now.
        if not self.waits_for_start():
            self.scheduler.fail_queued(self.outage())

    async def _attempt_once(self) -> None:
        transport: Transport | None = None
        try:
            try:
                async with self._open_transport(
                    self.alias, self.cfg, self.config, self._notification
                ) as transport:
                    await self._connect_and_serve(transport)
            finally:
                # Before the failure is logged: the outage's journal entry carries this tail.
                self.upstream = None
                if transport is not None:
                    self.stderr = transport.stderr_tail() or self.stderr
        except SpawnError as exc:
            self._failed("spawn_failed", exc.describe(), exc.reason)
        except TransportError as exc:
            self._failed("outage", exc.describe(), exc.reason, exc.retry_after)
        except rpc.RPCError as exc:
            self._failed("outage", f"protocol error: {exc.message}", exc.message)
        except trio.TooSlowError:
            self._failed(
                "outage",
                "did not answer in time while connecting",
                "did not answer in time while connecting",
            )
        except Exception as exc:
            # A bug in handling one server must not take the daemon (and the others) down.
            logger.exception("%s: unexpected error", self.alias, extra=log_extra(self.alias))
            self._failed("outage", f"internal error: {exc!r}", f"internal error: {exc!r}")

    def _failed(
        self, event: str, detail: str, reason: str, retry_after: float | None = None
    ) -> None:
        now = trio.current_time()
        first = self.down_since is None
        if first:
            self.down_since = now
        restart = self.policy.on_failure(now)
        # A server that said when to come back (429/503 Retry-After) is not asked sooner.
        self.retry_at = max(restart.at, now + retry_after) if retry_after else restart.at
        changed = reason != self.last_error
        self.last_error = reason
        if restart.entered_crash_loop:
            self._log(
                logging.ERROR,
                "crash_loop",
                f"crash loop: {restart.failures} failures within "
                f"{self.policy.config.window:.0f} s; retrying every "
                f"{self.policy.config.cap:.0f} s. Last error: {reason}",
                reason,
            )
        elif first or changed or now - self._last_log >= _REMINDER_EVERY:
            # One line per transition while down, plus a reminder every few minutes.
            still = "" if first else "still "
            # The journal and the log line name the server already.
            detail = detail.splitlines()[0].removeprefix(f"{self.alias}: ")
            self._log(
                logging.ERROR if event == "spawn_failed" else logging.WARNING,
                event,
                f"{still}unavailable: {detail}; retrying at {clock_time(self.retry_at)}",
                reason,
            )
        else:
            logger.debug("%s: attempt failed again: %s", self.alias, reason)
        self._set_phase("waiting", reason)
        self.first_attempt.set()

    async def _back_off(self) -> None:
        assert self.retry_at is not None
        await trio.sleep_until(self.retry_at)
        self.retry_at = None
        what = "restarting" if self.transport_kind == "stdio" else "reconnecting"
        if self.policy.failures <= 1:
            self._log(logging.INFO, "restart", what)
        else:
            logger.debug("%s: %s (attempt %d)", self.alias, what, self.policy.failures + 1)

    async def _connect_and_serve(self, transport: Transport) -> None:
        up = Upstream(
            self.alias,
            transport,
            http=self.transport_kind == "http",
            era=self._era_hint,
            probe_timeout=self.config.daemon.probe_timeout,
            max_pages=self.config.daemon.max_pages,
        )
        try:
            with trio.fail_after(self.config.daemon.list_timeout):
                await up.connect()
                listing = await up.list_tools()
        except TransportError:
            if up.probe_died and self._era_hint == "auto":
                self._era_hint = "legacy"
            raise
        self.lists.listed(listing)
        self.lists.connected()
        self.registry.update(self.alias, listing.tools, trusted=self.cfg.trusted)
        self.upstream = up
        self.policy.on_start(trio.current_time())
        # Connecting and listing worked: that is a success as far as the breaker goes.
        self.breaker.record_success(trio.current_time())
        was_down = self.down_since is not None
        self.down_since = None
        self.last_error = None
        self._set_phase("connected")
        self.first_attempt.set()
        if was_down:
            self._log(logging.INFO, "recovered", f"available again ({len(listing.tools)} tools)")
        else:
            self._log(
                logging.INFO,
                "ready",
                f"{up.era} era ({up.version}), {len(listing.tools)} tools",
            )
        await self._serve(up, transport)

    async def _serve(self, up: Upstream, transport: Transport) -> None:
        with single_exceptions():
            async with trio.open_nursery() as nursery:
                closed = getattr(transport, "closed", None)
                if closed is not None:
                    nursery.start_soon(self._watch, closed)
                if up.era == "modern" and up.lists_changes:
                    nursery.start_soon(self.lists.listen, up)
                # A legacy HTTP session's server-push stream: list_changed, pings, logs.
                push = getattr(transport, "listen", None)
                if up.era == "legacy" and push is not None:
                    nursery.start_soon(push)
                self.scheduler.attach(up, nursery)
                try:
                    await self._serve_loop(up, transport)
                finally:
                    self.scheduler.detach()
                    nursery.cancel_scope.cancel()

    async def _watch(self, event: trio.Event) -> None:
        await event.wait()
        self._closed = True
        self._wake.set()

    async def _serve_loop(self, up: Upstream, transport: Transport) -> None:
        self._closed = False
        self._schedule_health_check()
        while True:
            now = trio.current_time()
            if self._closed:
                error = getattr(transport, "error", None)
                raise error if isinstance(error, TransportError) else TransportError("closed")
            self.policy.refresh(now)
            if now >= self._health_at and self.breaker.state == "closed":
                # An HTTP endpoint has no process whose exit we would see: ask it now
                # and then, so an outage shows before a model tries a tool.
                self._suspect = True
                self._schedule_health_check()
            if self._suspect:
                self._suspect = False
                await self._liveness(up)
            if self.lists.due:
                await self.lists.refetch(up)
            if self.breaker.poll(now) == "half_open":
                await self._half_open_probe(up)
            deadline = self._next_deadline()
            self._wake = trio.Event()
            with trio.move_on_at(deadline):
                await self._wake.wait()

    def _schedule_health_check(self) -> None:
        every = self.config.daemon.health_interval
        if self.transport_kind != "http" or every <= 0:
            self._health_at = math.inf
            return
        self._health_at = trio.current_time() + every * random.uniform(0.9, 1.1)

    def _next_deadline(self) -> float:
        deadline = self._health_at
        st = self.breaker.status(trio.current_time())
        if st.state == "open" and st.retry_at is not None:
            deadline = min(deadline, st.retry_at)
        stable_at = self.policy.stable_at
        if stable_at is not None and (self.policy.failures or self.policy.in_crash_loop):
            # Past failures are forgotten once the server has stayed up a while.
            deadline = min(deadline, stable_at)
        return deadline

    async def _half_open_probe(self, up: Upstream) -> None:
        adm = self.breaker.allow(trio.current_time())
        if not (adm.allowed and adm.probe):
            return
        self._publish()
        try:
            with trio.fail_after(self.config.daemon.probe_timeout):
                await up.probe()
        except (TransportError, trio.TooSlowError) as exc:
            reason = exc.reason if isinstance(exc, TransportError) else "probe timed out"
            self.breaker.record_failure(trio.current_time(), reason, adm.ticket)
        except rpc.RPCError:
            self.breaker.record_success(trio.current_time(), adm.ticket)
        else:
            self.breaker.record_success(trio.current_time(), adm.ticket)
        finally:
            self.breaker.release_probe(adm.ticket)
        self._publish()

    async def _liveness(self, up: Upstream) -> None:
        """After a failed call (or for an HTTP server, now and then): a server that does
        not answer a probe is restarted (stdio) or reconnected (HTTP), and its tools are
        marked unavailable meanwhile."""
        try:
            with trio.fail_after(_LIVENESS_TIMEOUT):
                await up.probe()
        except rpc.RPCError:
            return
        except trio.TooSlowError:
            raise TransportError(
                f"{self.alias} stopped responding (a probe got no answer in "
                f"{_LIVENESS_TIMEOUT:.0f} s)"
            ) from None

    def _notification(self, msg: rpc.Notification) -> None:
        if msg.method == "notifications/progress":
            self.progress.handle(msg)
        else:
            self.lists.on_notification(msg)

    def _is_connected(self) -> bool:
        return self.phase == "connected"

    def _install(self, tools: list[mcp.Tool]) -> None:
        if self.registry.update(self.alias, tools, trusted=self.cfg.trusted):
            self.changed()

    @property
    def settings(self) -> DaemonConfig:
        return self.config.daemon

    def waits_for_start(self) -> bool:
        """Calls that come while the first start is under way wait for it."""
        return self.phase == "starting" and not self.first_attempt.is_set()

    def wake(self) -> None:
        self._wake.set()

    def changed(self) -> None:
        self._on_change(self.alias)

    @property
    def subscribed(self) -> bool:
        return self.lists.subscribed

    @property
    def refetches(self) -> int:
        return self.lists.refetches

    def maybe_refresh(self) -> None:
        self.lists.maybe_refresh()

    def request_refetch(self) -> None:
        self.lists.request()

    # -- calls from agents --

    def start_call(
        self,
        params: mcp.CallToolParams,
        on_done: Done,
        *,
        capabilities: dict[str, Any] | None = None,
        on_progress: Deliver | None = None,
        timeout: float | None = None,
    ) -> PendingCall:
        """Submit one tools/call; ``on_done`` gets its outcome (a raw result, an Outage
        or the server's RPCError) exactly once, unless the call is cancelled.

        ``timeout`` (default: the configured one) bounds the server's answer, not the
        wait for a free slot; progress extends it up to ``max_call_time``."""
        if timeout is None:
            timeout = self.config.call_timeout(self.alias, params.name)
        call = PendingCall(params, capabilities, timeout, on_progress, on_done)
        self.scheduler.submit(call)
        return call

    async def call(
        self,
        params: mcp.CallToolParams,
        *,
        capabilities: dict[str, Any] | None = None,
        call_timeout: float | None = None,
        on_progress: Deliver | None = None,
    ) -> Raw:
        """``start_call``, awaited. Raises CallRefused (with an Outage) or rpc.RPCError."""
        done = trio.Event()
        box: list[Outcome] = []

        def finished(outcome: Outcome) -> None:
            box.append(outcome)
            done.set()

        call = self.start_call(
            params,
            finished,
            capabilities=capabilities,
            on_progress=on_progress,
            timeout=call_timeout,
        )
        try:
            await done.wait()
        except BaseException:
            call.cancel()
            raise
        outcome = box[0]
        if isinstance(outcome, Outage):
            raise CallRefused(outcome)
        if isinstance(outcome, rpc.RPCError):
            raise outcome
        return outcome

    @property
    def inflight(self) -> int:
        return self.scheduler.running

    @property
    def waiting(self) -> int:
        return len(self.scheduler.queue)

    def check_liveness(self) -> None:
        """After a failed call: probe the server soon (see _liveness)."""
        self._suspect = True
        self._wake.set()

    def availability_failure(self, elapsed: float, reason: str, ticket: int) -> None:
        now = trio.current_time()
        self.stats.record(elapsed, error=True)
        before = self.breaker.state
        self.breaker.record_failure(now, reason, ticket)
        if self.breaker.state != before:
            self._publish()

    async def wait_idle(self) -> None:
        await self.scheduler.wait_idle()

    def status(self) -> dict[str, Any]:
        now = trio.current_time()
        b = self.breaker.status(now)
        snap = self.stats.snapshot()
        up = self.upstream
        return {
            "alias": self.alias,
            "transport": self.transport_kind,
            "state": self.state,
            "era": up.era if up else None,
            "protocol_version": up.version if up else None,
            "tools": self.registry.count(self.alias),
            "since": self.since,
            "last_error": self.last_error,
            "retry_at": self.retry_at if self.phase == "waiting" else b.retry_at,
            "restarts": self.policy.restarts,
            "breaker": {
                "state": b.state,
                "consecutive_failures": b.consecutive_failures,
                "failures": b.total_failures,
                "opened": b.times_opened,
            },
            "calls": snap.calls,
            "errors": snap.errors,
            "p50_ms": None if snap.p50 is None else round(snap.p50 * 1000, 2),
            "p99_ms": None if snap.p99 is None else round(snap.p99 * 1000, 2),
            "inflight": self.inflight,
            "waiting": self.waiting,
            "stderr": self.stderr[-5:] if self.transport_kind == "stdio" else [],
            "dropped_tools": self.lists.dropped,
        }
