"""One configured server's parts, wired together, and what they tell of it: its state
and outage, what its calls and lists need of it (its row in ``mcpd status`` is
``status_of``'s). The rest of mcpd holds a server by this.

Running the server (starting it, serving it, backing off when it fails) is its
runner's job: ``runner.Runner`` has its parts and keeps the facts kept here (its
upstream, its process, the kind of transport it is reached by) up to date.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from protocol.mcp import core as mcp
from transports.base import Started

from ...config.tables.model import Config, DaemonConfig
from ...config.tables.servertable import ServerConfig
from ...login_answers import LoginStatus
from ...policy.redaction.guard import SecretGuard
from ...policy.redaction.masking import KnownSecrets
from ...registry.tables.catalog import Catalog
from ..asking.askback import AskRoutes
from ..asking.progress import ProgressRoutes
from ..calling.calls import Call, CallHost, CallLimits, SessionMark
from ..calling.queue_bytes import QueueBytes
from ..calling.scheduler import CallScheduler
from ..circuit.breaker import Breaker, BreakerConfig
from ..circuit.circuit_states import Transition
from ..connected.answer_wait import AnswerWait
from ..connected.health import LIVENESS_TIMEOUT, Doubt, Health
from ..connected.log_messages import LogMessages
from ..connected.session import Session
from ..connected.upstream import Upstream
from ..lists.prompt_resource_lists import PromptResourceKeeper
from ..lists.tool_list_keeper import ToolListKeeper
from ..oauth import attach
from ..results.taking_apart import ReplyWork
from ..status.outage import Outage, cleaned_line
from ..status.state import backoff_config, breaker_config, outage_of, server_state
from ..status.stats import LatencyStats
from .backoff import RestartPolicy
from .downtime import Downtime
from .events import LifecycleJournal
from .lazy_state import LazyState

if TYPE_CHECKING:
    from ..oauth import Login, ServerAuth


class ServerParts(CallHost):
    def __init__(
        self,
        alias: str,
        cfg: ServerConfig,
        config: Config,
        registry: Catalog,
        on_change: Callable[[str], None],
        *,
        guard: SecretGuard | None = None,
        waiting: QueueBytes | None = None,
    ) -> None:
        """``waiting``: the bytes the calls waiting for every server keep (None: this
        server's alone). Each part is built after those it is handed."""
        self.alias = alias
        # The secrets mcpd holds, kept out of everything this server sends.
        self.guard = guard or SecretGuard(KnownSecrets())
        self.cfg = cfg
        self._config = config
        self.limits = CallLimits(alias, config)
        self.registry = registry
        self._on_change = on_change
        self.transport_kind: str = cfg.kind
        self.breaker = Breaker(
            self._breaker_config(config),
            on_transition=self._on_breaker,
            kept_reason=self.kept_reason,
        )
        self.policy = RestartPolicy(backoff_config(config.daemon), loops=cfg.kind == "stdio")
        self.stats = LatencyStats()
        self.replies = ReplyWork(alias, self.guard)
        self.scheduler = CallScheduler(self, cfg.concurrency(), waiting)
        self.lazy = LazyState.of(cfg)  # None: not started on demand
        if self.lazy is not None:
            self.scheduler.demand = self.lazy.demand  # its calls start it, and keep it running
        self._upstream: Upstream | None = None
        # Told of each session that ends (``upstream``), with its mark.
        self.on_session_end: Callable[[str, SessionMark], None] | None = None
        self.stderr: list[str] = []
        self.first_attempt = trio.Event()
        self.health = self._new_health()
        self.events = LifecycleJournal(alias, lambda: self.stderr)
        reread = functools.partial(self.guard.reread, alias, what="a progress report")
        self.progress = ProgressRoutes(f"mcpd-{alias}-", reread, alias)
        # What the server's own task asks of it once it is served, each in list_timeout.
        self.answers = AnswerWait(alias, lambda: self.config.daemon.list_timeout)
        self.tool_list = ToolListKeeper(
            alias,
            self.wake,
            self._is_connected,
            self._install,
            self._read_ahead,
            answers=self.answers,
        )
        # OAuth, for HTTP servers: dormant until the server answers 401.
        self.auth, self.login = self._new_auth()
        self.downtime = Downtime(
            self.events,
            self.policy,
            self._publish,
            process=cfg.kind == "stdio",
            login_changed=self.auth.wait_changed if self.auth is not None else None,
        )
        self.attempts = 0
        # Its process while it runs, and what of its sandbox its last start could not
        # apply (stdio servers only).
        self.process: Started | None = None
        self.unprotected: str | None = None
        # Prompts, resources and templates; what the server asks back, and of whom.
        self.prompt_resources = PromptResourceKeeper(
            alias, registry, self.wake, self.changed, self.answers
        )
        self.logs = LogMessages(alias, self.wake, self.guard, self.answers)
        self.asks = AskRoutes(
            alias,
            lambda: self.config.daemon.ask_timeout,
            cfg.relay,
            replies=self.replies,
            modern=self._modern_version,
        )
        self.session = self._new_session()

    def _new_health(self) -> Health:
        """Whether the server is there, asked of what it has done and of the parts that
        know (its breaker, its calls, its login, its restart policy)."""
        return Health(
            self.alias,
            self.breaker,
            interval=self._health_interval,
            probe_timeout=lambda: self.config.daemon.probe_timeout,
            on_probe=self._publish,
            answered_at=lambda: self.scheduler.answered_at,
            token_work=lambda: self.auth.token_work if self.auth is not None else 0,
            trouble_shown=lambda: self.policy.config.stable_after,
        )

    def _new_auth(self) -> tuple[ServerAuth | None, Login | None]:
        """An HTTP server's OAuth and its login, its tokens kept out of what it sends."""
        if self.cfg.url is None:
            return None, None
        auth, login = attach(self.alias, self.cfg, self._config)
        auth.on_tokens = self.guard.refresh
        auth.kept_reason = self.kept_reason
        return auth, login

    def _new_session(self) -> Session:
        """The server's sessions, each told to the parts that serve it."""
        return Session(
            self.alias,
            era=self.cfg.era,
            relay=list(self.cfg.relay),
            events=self.events,
            health=self.health,
            policy=self.policy,
            tool_list=self.tool_list,
            prompt_resources=self.prompt_resources,
            logs=self.logs,
            progress=self.progress,
            scheduler=self.scheduler,
            auth=self.auth,
            replies=self.replies,
            answers=self.answers,
            gate=self.registry.gate,
        )

    def _modern_version(self) -> str | None:
        up = self.upstream
        return up.version if up is not None and up.era == "modern" else None

    @property
    def upstream(self) -> Upstream | None:
        """The session in force (None: none is)."""
        return self._upstream

    @upstream.setter
    def upstream(self, up: Upstream | None) -> None:
        # A session let go of is over, whatever ends it (a process gone, an idle stop,
        # a reload): a server started again may give its ids to new tasks.
        ended, self._upstream = self._upstream, up
        if ended is not None and ended is not up:
            ended.mark.holds.clear()
            self.prompt_resources.session_ended()
            if self.on_session_end is not None:
                self.on_session_end(self.alias, ended.mark)

    # -- state shown to people and models --

    @property
    def state(self) -> str:
        if self.lazy is not None and self.lazy.stopping:
            return "idle"
        return server_state(self.downtime, self.breaker, trio.current_time())

    @property
    def phase(self) -> str:
        return self.downtime.phase

    def outage(self) -> Outage:
        return outage_of(
            self.alias, self.state, self.breaker, self.downtime, trio.current_time(), self.stderr
        )

    @property
    def available(self) -> bool:
        """Whether calls can be expected to work (the tools are listed as available)."""
        if self.lazy is not None and self.lazy.listed_available(self.phase):
            return True
        return self.state in ("ready", "degraded")

    def kept_reason(self, reason: str) -> str:
        """Why something failed, as every record of it keeps it (the breaker, the
        downtime, the login's state, and through them the outages, ``mcpd status``
        and the journal): one line, with every secret mcpd holds masked in what it
        quotes of the server."""
        return cleaned_line(self.guard.text(self.alias, reason, "why it failed"))

    def _publish(self) -> None:
        available = self.available
        if available:
            self.registry.set_availability(self.alias, True)
        else:
            self.registry.set_availability(self.alias, False, self.outage().marker())
        self._on_change(self.alias)

    def _on_breaker(self, t: Transition) -> None:
        self.events.breaker(t)
        self.wake()
        # Its state changed with it (a probe, a recovery), where no phase did.
        self._on_change(self.alias)

    # -- what its parts call back --

    def _health_interval(self) -> float:
        return self.config.daemon.health_interval if self.transport_kind != "stdio" else 0.0

    def _is_connected(self) -> bool:
        return self.phase == "connected"

    def _read_ahead(self, tool: mcp.Tool) -> None:
        self.registry.read_ahead(self.alias, tool)

    def _install(self, tools: list[mcp.Tool]) -> None:
        if self.registry.update(self.alias, tools, trusted=self.cfg.trusted):
            self.changed()

    # -- what the rest of mcpd reads and asks of it --

    @property
    def config(self) -> Config:
        return self._config

    @config.setter
    def config(self, config: Config) -> None:
        """A reload's config, put in force for the server as it runs: its breaker and its
        restarts keep what they counted and go on by the new limits, and a new interval
        between checks starts counting now."""
        interval = self._health_interval()
        self._config = config
        self.limits = CallLimits(self.alias, config)
        self.breaker.reconfigure(self._breaker_config(config))
        self.policy.reconfigure(backoff_config(config.daemon))
        if self._health_interval() != interval and self.phase == "connected":
            self.health.schedule()
            self.wake()

    def _breaker_config(self, config: Config) -> BreakerConfig:
        # A probe is a call, so the longest a call may take (and the liveness probe
        # that follows one) bounds how long one can hold the slot.
        probe_timeout = config.call_timeout(self.alias) + LIVENESS_TIMEOUT
        return breaker_config(config.daemon, probe_timeout=probe_timeout)

    @property
    def settings(self) -> DaemonConfig:
        return self._config.daemon

    def waits_for_start(self) -> bool:
        """Calls that come while the first start is under way wait for it; a lazy
        server's, while it is idle, being stopped (its phase still says connected until
        the stop is done) or started on demand."""
        if self.lazy is not None:
            return (self.phase != "connected" or self.lazy.stopping) and self.available
        return self.phase == "starting" and not self.first_attempt.is_set()

    def wake(self) -> None:
        self.session.wake()

    def changed(self) -> None:
        self._on_change(self.alias)

    @property
    def inflight(self) -> int:
        return self.scheduler.running

    @property
    def waiting(self) -> int:
        return len(self.scheduler.queue)

    def check_liveness(self) -> None:
        """After a failed call: probe the server soon (see health)."""
        self.health.suspect = True
        self.wake()

    def version_refused(self) -> None:
        self.session.doubt_version()

    def availability_failure(
        self, elapsed: float, reason: str, ticket: int, wait: float | None = None
    ) -> None:
        now = trio.current_time()
        self.stats.record(elapsed, error=True)
        before = self.breaker.state
        if wait is None:
            self.breaker.record_failure(now, reason, ticket)
        else:
            self.breaker.hold_open(now, now + wait, reason, ticket)
        # A wait may only have moved the retry time of a circuit open already.
        if self.breaker.state != before or wait is not None:
            self._publish()

    def told_to_wait(self, reason: str, wait: float) -> None:
        """A request other than a call, or a probe, was answered 429 or 503 with a
        Retry-After of ``wait`` seconds: its circuit opens until then, as a call's
        does."""
        now = trio.current_time()
        self.breaker.hold_open(now, now + wait, reason)
        self._publish()

    def reset_circuit(self, who: str) -> bool:
        """``mcpd reset``, asked by ``who``: its circuit closes on trial, the next call
        deciding. Whether it was not closed."""
        st = self.breaker.status(trio.current_time())
        if st.state == "closed":
            return False
        # Before the move, whose own line follows: the journal says who asked first.
        said = f"circuit reset by {who}: the next call decides (it was {st.state}: {st.reason})"
        if self.phase == "waiting":
            # Not connected: the restart's wait, which no circuit holds, is left as it is.
            said += f"; the server is {self.state}, not connected, until it is started again"
        self.events.event(logging.INFO, "reset", said, st.reason)
        return self.breaker.reset(trio.current_time())

    def failed_call(self, reason: str, start: float, stderr: str | None) -> Outage:
        state = self.state
        if state not in ("ready", "degraded"):
            down = self.outage()
            return Outage(self.alias, state, reason, down.since, down.retry_at, stderr)
        up = self.upstream
        if up is not None and up.transport.error is not None:
            # Its session ends with this failure (a process gone): the server is down,
            # as its runner is about to say, with when it tries again.
            return Outage(self.alias, "failed", reason, start, stderr=stderr)
        # Answering others; a failure not counted against it (its call began before
        # the breaker last moved) makes it no less this call's.
        return Outage(self.alias, "degraded", reason, start, stderr=stderr)

    def timed_out(self, call: Call, elapsed: float, reason: str) -> None:
        self.stats.record(elapsed, error=True)
        # One agent's slow tool must not close the server to every agent: whether
        # this counts against it waits for what it answers next (``health``).
        self.health.doubt(Doubt(trio.current_time(), reason, call.ticket, call.probe))
        # A trial's slot is the doubt's now, given back as it is settled.
        call.probe = False
        self.wake()

    async def phase_changed(self) -> None:
        await self.downtime.phase_changed()

    def login_status(self) -> LoginStatus | None:
        """Its login as ``mcpd auth status`` shows it (None: it has no OAuth): what its
        authorization server said (the issuer, the client id, the scopes) is shown
        with every secret mcpd holds masked."""
        if self.login is None or self.auth is None or not self.auth.enabled:
            return None
        return self.guard.shown_row(self.login.status())
