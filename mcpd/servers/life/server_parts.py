"""One configured server's parts, wired together, and what they tell of it: its state
and outage (its ``standing.Standing``'s, which its call scheduler holds rather than all
of this), what its lists need of it (its row in ``mcpd status`` is ``status_of``'s). The
rest of mcpd holds a server by this.

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

from ...config.tables.model import Config
from ...config.tables.servertable import ServerConfig
from ...login_answers import LoginStatus
from ...policy.redaction.guard import SecretGuard
from ...policy.redaction.masking import KnownSecrets
from ...registry.tables.catalog import Catalog
from ..asking.askback import AskRoutes
from ..asking.progress import ProgressRoutes
from ..calling.calls import CallLimits, SessionMark
from ..calling.queue_bytes import QueueBytes
from ..calling.scheduler import CallScheduler
from ..circuit.breaker import Breaker, BreakerConfig
from ..circuit.circuit_states import Transition
from ..connected.answer_wait import AnswerWait
from ..connected.health import LIVENESS_TIMEOUT, Health
from ..connected.log_messages import LogMessages
from ..connected.session import Session
from ..connected.upstream import Upstream
from ..lists.prompt_resource_lists import PromptResourceKeeper
from ..lists.rediscovery import Rediscovery
from ..lists.tool_list_keeper import ToolListKeeper
from ..oauth import attach
from ..results.taking_apart import ReplyWork
from ..status.outage import Outage, cleaned_line
from ..status.state import backoff_config, breaker_config
from ..status.stats import LatencyStats
from .backoff import RestartPolicy
from .downtime import Downtime
from .events import LifecycleJournal
from .lazy_state import LazyState
from .standing import Standing

if TYPE_CHECKING:
    from ..oauth import Login, ServerAuth


class ServerParts:
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
        self.registry = registry
        self._on_change = on_change
        self.breaker = Breaker(
            self._breaker_config(config),
            on_transition=self._on_breaker,
            kept_reason=self.kept_reason,
        )
        self.policy = RestartPolicy(backoff_config(config.daemon), loops=cfg.kind == "stdio")
        self.stats = LatencyStats()
        self.replies = ReplyWork(alias, self.guard)
        self.lazy = LazyState.of(cfg)  # None: not started on demand
        # Told of each session that ends (``upstream``), with its mark.
        self.on_session_end: Callable[[str, SessionMark], None] | None = None
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
        self.rediscovery = Rediscovery(alias, registry.gate)
        self.standing = self._new_standing()
        self.first_attempt = self.standing.first_attempt
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
        self.scheduler = self._new_scheduler(waiting)
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

    def _new_scheduler(self, waiting: QueueBytes | None) -> CallScheduler:
        scheduler = CallScheduler(
            self.standing,
            progress=self.progress,
            asks=self.asks,
            replies=self.replies,
            limit=self.cfg.concurrency(),
            waiting=waiting,
        )
        if self.lazy is not None:
            scheduler.demand = self.lazy.demand  # its calls start it, and keep it running
        return scheduler

    def _new_standing(self) -> Standing:
        """What its calls find of it and tell it, made of the parts that know."""
        return Standing(
            self.alias,
            guard=self.guard,
            breaker=self.breaker,
            stats=self.stats,
            limits=CallLimits(self.alias, self._config),
            transport_kind=self.cfg.kind,
            downtime=self.downtime,
            lazy=self.lazy,
            health=self.health,
            rediscovery=self.rediscovery,
            registry=self.registry,
            wake=self.wake,
            on_change=self._on_change,
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
            rediscovery=self.rediscovery,
        )

    def _modern_version(self) -> str | None:
        up = self.upstream
        return up.version if up is not None and up.era == "modern" else None

    @property
    def upstream(self) -> Upstream | None:
        """The session in force (None: none is)."""
        return self.standing.upstream

    @upstream.setter
    def upstream(self, up: Upstream | None) -> None:
        # A session let go of is over, whatever ends it (a process gone, an idle stop,
        # a reload): a server started again may give its ids to new tasks.
        ended, self.standing.upstream = self.standing.upstream, up
        if ended is not None and ended is not up:
            ended.mark.holds.clear()
            self.prompt_resources.session_ended()
            if self.on_session_end is not None:
                self.on_session_end(self.alias, ended.mark)

    # -- state shown to people and models (its standing's) --

    @property
    def state(self) -> str:
        return self.standing.state

    @property
    def phase(self) -> str:
        return self.downtime.phase

    def outage(self) -> Outage:
        return self.standing.outage()

    @property
    def available(self) -> bool:
        """Whether calls can be expected to work (the tools are listed as available)."""
        return self.standing.available

    @property
    def limits(self) -> CallLimits:
        return self.standing.limits

    @property
    def transport_kind(self) -> str:
        """ "stdio" or "http", as the server is reached now (its runner may switch)."""
        return self.standing.transport_kind

    @transport_kind.setter
    def transport_kind(self, kind: str) -> None:
        self.standing.transport_kind = kind

    @property
    def stderr(self) -> list[str]:
        """A child's last lines of stderr, as its runner last read them."""
        return self.standing.stderr

    @stderr.setter
    def stderr(self, lines: list[str]) -> None:
        self.standing.stderr = lines

    def kept_reason(self, reason: str) -> str:
        """Why something failed, as every record of it keeps it (the breaker, the
        downtime, the login's state, and through them the outages, ``mcpd status``
        and the journal): one line, with every secret mcpd holds masked in what it
        quotes of the server."""
        return cleaned_line(self.guard.text(self.alias, reason, "why it failed"))

    def _publish(self) -> None:
        self.standing.publish()

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
        self.standing.limits = CallLimits(self.alias, config)
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

    def waits_for_start(self) -> bool:
        return self.standing.waits_for_start()

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
        """After a failed request: probe the server soon (see health)."""
        self.standing.check_liveness()

    def version_refused(self) -> None:
        self.standing.version_refused()

    def told_to_wait(self, reason: str, wait: float) -> None:
        self.standing.told_to_wait(reason, wait)

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
        return self.standing.failed_call(reason, start, stderr)

    async def phase_changed(self) -> None:
        await self.downtime.phase_changed()

    def login_status(self) -> LoginStatus | None:
        """Its login as ``mcpd auth status`` shows it (None: it has no OAuth): what its
        authorization server said (the issuer, the client id, the scopes) is shown
        with every secret mcpd holds masked."""
        if self.login is None or self.auth is None or not self.auth.enabled:
            return None
        return self.guard.shown_row(self.login.status())
