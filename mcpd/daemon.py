"""The daemon: the wiring. It builds the parts (config, the tool table, the supervised
servers, the agents' socket, the state file, systemd, what it reports of itself), owns
the nursery they run in, and handles signals and reload: a config read again
(``reloading.reread``) is put in force part by part. The parts see each other only
through what is handed to them here."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Final

import trio

from protocol.jsonrpc import messages as rpc
from protocol.shown.logfields import log_extra
from transports import chunks, linewriter
from transports.stdio.loopback import relay
from transports.stdio.process import early
from transports.stdio.process.launch import START_MARK
from transports.stdio.sandbox import anchors

from .agents.agent_server import AgentServer
from .agents.connection.ending import answer_stopping
from .agents.daemon_seam import DaemonForAgents, Lines
from .agents.entry.peers import server_of
from .audit.log import AuditLog
from .config.tables.model import Config, ConfigError, DaemonConfig, PinPolicy
from .local.pins import pinfile
from .local.service.systemd import Notifier, SystemdEnv, run_test_faults, run_watchdog
from .local.state.endpoint_token import TokenFile, renew_exposed, token_path, usable_at_start
from .local.state.statefile import FILE_NAME, LiveEra, StateKeeper, state_dir
from .oversight import Oversight
from .policy.decision.gate import CallGate
from .policy.waiting.approvals import Approvals
from .registry.gating.gate import ListGate
from .registry.profiles.views import ProfileView
from .registry.tables.catalog import Catalog
from .registry.tables.curation import ToolBudget
from .reloading.outcome import ReloadReport
from .reloading.reread import Rereader, reload_refusal, unmatched_profile
from .runtime_secrets import RuntimeSecrets
from .servers.all_servers import AllServers
from .servers.auth_commands import Logins
from .servers.shared import ResetOutcome
from .servers.status.history import Histories, ServerHistory
from .servers.supervisor import Supervisor
from .signals import Signals
from .starting.agents_listener import take_listener
from .starting.cannot_start import DaemonError
from .starting.listening import Listening
from .status_document import StatusDocument
from .status_report import StatusReport

__all__ = ["Daemon"]

logger = logging.getLogger("mcpd")


# The line writer and reader the stdio transports use, lent to agent connections.
_LINES: Final = Lines(writer=linewriter.LineWriter, batch=chunks.batch, receive=chunks.receive)


class Daemon(DaemonForAgents):
    def __init__(
        self,
        config: Config,
        *,
        config_path: str | None = None,
        sysd: SystemdEnv | None = None,
        on_settled: Callable[[bool], None] | None = None,
        socket_for: Callable[[Config], str] | None = None,
        splice: bool = True,
        listening: Listening | None = None,
    ) -> None:
        """``on_settled`` is called once the daemon has started (False) and after each
        reload (True): when what it holds for the long run is built. ``socket_for`` says
        where a restart with a reloaded config would listen (``starting.serve`` knows
        --socket and the environment); by default, that config's socket. ``splice`` off, every
        tools/call is encoded as any other message is, never written around the bytes
        it carries (``protocol.jsonrpc.splice``): what the agents read is the same either way.
        ``listening``: the sockets ``mcpd serve`` bound before starting any server."""
        self.config = config
        self._on_settled = on_settled
        self.config_path = config_path
        self.sysd = sysd or SystemdEnv(Notifier(None))
        # The policy, the approvals, the audit log and the secrets guarded in what
        # servers send; a call waiting for approval, or decided, redraws open status
        # pages as a server's change does.
        self.oversight = Oversight(config, state_dir(config), lambda: self.all_servers.changed())
        # What every server lists passes it; its settings follow the config in force.
        gate = ListGate(self._pin_policy, masking=self.oversight.guard)
        self.catalog = Catalog(config.naming, gate)
        self.rereader = Rereader(
            config_path, config, self.catalog, socket_for or Config.socket_path
        )
        self.supervisor = Supervisor(
            config, self.catalog, on_change=self._changed, guard=self.oversight.guard
        )
        self.all_servers = AllServers(self.supervisor, self.catalog)
        self.logins = Logins(self.supervisor)
        self.histories = Histories(lambda: self.state.changed())
        self.state = StateKeeper(
            os.path.join(state_dir(config), FILE_NAME),
            self.catalog,
            lambda: self.supervisor.config,
            self._era_of,
            self.histories.saved,
        )
        self.pins = pinfile.PinKeeper(
            os.path.join(state_dir(config), pinfile.FILE_NAME),
            gate.review,
            self._rejudge,
            lambda alias: alias in self.supervisor.config.servers,
            lambda alias: self.supervisor.config.pin_policy(alias).hold_new_servers,
        )
        self.tool_budget = ToolBudget(config.daemon.max_tools)
        self.agent_server = AgentServer(self.all_servers, self, _LINES, splice=splice)
        self.agent_server.configure(config.profiles, config.naming)
        self.report = StatusReport(
            self.supervisor,
            self.catalog,
            self.all_servers,
            self.agent_server,
            self.oversight,
            self.histories,
            self.tool_budget,
            self.state.path,
            [self.state.saving, self.pins.saving, self.oversight.audit.saving],
        )
        self.token = TokenFile(token_path(state_dir(config)))
        self.secrets = RuntimeSecrets(self.token, self.supervisor, self.oversight.guard.refresh)
        self.oversight.watch_secrets("daemon", self.secrets.held_now)
        self.started = trio.Event()
        self.socket_path = config.socket_path()
        self._started = 0.0
        # STATUS= as last sent: systemd shows it to every local user, so it says how
        # many servers are in which state, never their names (``Supervisor.counts``).
        self._status_line = ""
        self._stop = trio.Event()
        self._reload_lock = trio.Lock()
        self.signals = Signals(self.reload, self.stop)
        self._listening = listening

    @property
    def notifier(self) -> Notifier:
        return self.sysd.notifier

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._started = trio.current_time()
        # Every socket agents reach mcpd on is bound before any server starts
        # (``starting.listening``): by ``mcpd serve`` before the servers it starts early,
        # else here.
        prebound, self._listening = self._listening, None
        listener, listening, owned, self.socket_path = take_listener(
            self.config, self.socket_path, self.sysd.sockets, prebound
        )
        exposed = renew_exposed(self.token.path)
        if exposed is not None:
            logger.warning("%s", exposed, extra=log_extra(None, "token_file"))
        try:
            async with trio.open_nursery() as nursery:
                # Signals are heard from the first moment: a stop asked for during the
                # start cancels it, wherever it waits (a server that never answers).
                nursery.start_soon(self.signals.hear)
                nursery.start_soon(self.signals.reloads, self.started)
                nursery.start_soon(self._stopping, nursery.cancel_scope)
                await self.pins.load()  # before any list is judged
                await nursery.start(self.pins.run)
                await self.state.seed(self.config)
                enabled = [a for a, c in self.config.servers.items() if c.enabled]
                self.histories.load(self.state.history_read, enabled)
                await nursery.start(self.state.run, self.started)
                await nursery.start(self.histories.run, lambda: self.supervisor.servers)
                await nursery.start(self.oversight.run)
                if self.config.daemon.http_listen:
                    with usable_at_start():
                        self.http_token()  # guarded before any server speaks
                await nursery.start(self.supervisor.run)
                await nursery.start(run_watchdog, self.notifier)
                await nursery.start(
                    run_test_faults, self.notifier, self.sysd.faults, self.sysd.wedge_seconds
                )
                await self.supervisor.wait_started(
                    self._started + self.config.daemon.startup_deadline
                )
                problem = unmatched_profile(self.config, self.catalog)
                if problem is not None:
                    raise problem
                # Agents are served once every server has had its first attempt: with socket
                # activation the first connection (which started us) waits in the backlog
                # instead of seeing only the tools of the servers that happened to be quick.
                await nursery.start(
                    self.agent_server.serve,
                    listener,
                    listening.take_profiles(),
                    listening.take_http(),
                )
                self.started.set()
                self._status_line = self.supervisor.counts()
                self.notifier.ready(self._status_line)
                logger.info(
                    "listening on %s; %s",
                    self.socket_path,
                    self.supervisor.summary(),
                    extra=log_extra(None),
                )
                task_status.started()
                if self._on_settled is not None:
                    self._on_settled(False)
            if not self.started.is_set():
                task_status.started()  # stopped before it was done: what waits goes on
        except* (ConfigError, DaemonError) as group:
            raise group.exceptions[0] from None  # what serve() reports and exits with
        finally:
            # Everything has stopped: the records of the last calls (those cancelled as
            # their agents were let go among them) are written before mcpd exits.
            with trio.move_on_after(5, shield=True):
                await self.oversight.audit.flush()
            self.oversight.audit.close()
            listening.close()
            # Its servers have all stopped: what their sandboxes held to follow the hidden
            # paths is let go with them, as a restart would.
            anchors.forget_all()
            if owned is not None:
                owned.remove()

    def stop(self) -> None:
        self._stop.set()

    async def _stopping(self, everything: trio.CancelScope) -> None:
        """Once asked to stop: agents hear that mcpd stops, then everything is cancelled,
        a start or a reload still under way included."""
        await self._stop.wait()
        self.notifier.stopping()
        await self.agent_server.end_subscriptions()
        logger.info("stopping", extra=log_extra(None))
        self.oversight.audit.stopping = True
        await answer_stopping(self.agent_server.in_flight())
        everything.cancel()

    async def reload(self) -> ReloadReport:
        async with self._reload_lock:
            try:
                reread = self.rereader.read(self.config, self.socket_path)
                try:
                    # The new profiles' places, taken before a server the reload starts could.
                    await self.agent_server.sockets.claim(reread.config.profiles)
                except ConfigError as exc:
                    raise reload_refusal(exc) from None
            except rpc.RPCError as exc:
                self.report.reloads.refused(exc)
                raise
            new = reread.config
            self.notifier.reloading()
            # Servers the new config starts may speak before it is in force.
            self.oversight.expect(new)
            # A stop cancels a reload at one of its waits: before ``adopt`` the old
            # config is whole in force, after it the new one is (what ``adopt`` through
            # ``api.configure`` puts in force has no wait), and what is left undone is
            # starting and stopping servers, which the stop stops anyway.
            try:
                # What needs no server stopped is in force at once: a server's calls in
                # flight may hold its stop for up to call_timeout, and the new rules
                # decide every call made meanwhile.
                report = self.supervisor.adopt(new)
                report.restart, report.settings = reread.restart, reread.settings
                report.new_connections = reread.new_connections
                self.config = new
                self.report.reloads.taken()
                self.oversight.configure(new, [*report.removed, *report.changed, *report.added])
                self.agent_server.configure(new.profiles, new.naming)
                self.tool_budget.limit = new.daemon.max_tools
                # Pin settings may have changed: every list is judged by the new ones,
                # those of the servers started again once they run under them.
                for alias in report.unchanged:
                    self._rejudge(alias)
                # A call let through before may wait for a slot still: not sent unless
                # the rules and profiles now in force let it through too.
                self.agent_server.look_again()
                await self.agent_server.apply_sockets()
                await self.supervisor.restart(report)
                self.oversight.settle(new)
                for alias in report.changed:
                    self._rejudge(alias)
                # Added and changed servers get their first attempt before READY=1 and
                # before `mcpd reload` returns, as at start-up.
                await self.supervisor.wait_started(
                    trio.current_time() + new.daemon.startup_deadline
                )
                if self._on_settled is not None:
                    self._on_settled(True)
            finally:
                self.agent_server.sockets.release()  # what a reload given up had bound
                self._status_line = self.supervisor.counts()
                if not self._stop.is_set():
                    self.notifier.ready(self._status_line)
            return report

    def _rejudge(self, alias: str) -> None:
        """The server's lists through the gate again, and agents told what changed."""
        if self.catalog.rejudge(alias):
            self._changed(alias)

    def _changed(self, alias: str) -> None:
        server = self.supervisor.servers.get(alias)
        if server is not None:
            self.histories.note(alias, server)
        elif alias not in self.supervisor.config.servers:
            self.histories.forget(alias)
        # A tool held or gone is not called by a call that waits for a slot either.
        self.agent_server.look_again(alias)
        self.all_servers.changed()
        self.state.changed()
        self.tool_budget.check(self.catalog.size())
        self.report.unlisted.check(alias)
        if self.started.is_set():
            line = self.supervisor.counts()
            if line != self._status_line:
                self._status_line = line
                self.notifier.status(line)

    def _pin_policy(self, alias: str) -> PinPolicy:
        return self.supervisor.config.pin_policy(alias)

    def _era_of(self, alias: str) -> LiveEra | None:
        server = self.supervisor.servers.get(alias)
        up = server.upstream if server is not None else None
        if server is None or up is None:
            return None
        return up.era, up.version, server.tool_list.ttl_ms

    # -- what the agent side may ask of the daemon (agents.daemon_seam.DaemonForAgents) --

    def server_of(self, pid: int) -> str | None:
        running = self.supervisor.processes()
        for early_pid, token in early.waiting_marks().items():
            running.setdefault(early_pid, ("a server starting", token))
        if not running:
            return None  # no server's process to be (nothing of the peer is read)
        processes = {p: alias for p, (alias, _) in running.items()}
        marks = {token: alias for alias, token in running.values() if token}
        return server_of(pid, processes, marks, START_MARK)

    def server_pids(self) -> list[int]:
        return [*self.supervisor.processes(), *early.waiting_marks()]

    def relayed_by(self, port: int, to: int) -> str | None:
        return relay.relayed_by(port, to)

    @property
    def settings(self) -> DaemonConfig:
        return self.config.daemon

    @property
    def ready(self) -> bool:
        return self.started.is_set()

    def reset(self, alias: str, who: str, scope: ProfileView | None = None) -> ResetOutcome:
        return self.supervisor.reset(alias, who, None if scope is None else scope.has_server)

    def http_token(self) -> str:
        return self.secrets.http_token()

    @property
    def approvals(self) -> Approvals:
        return self.oversight.approvals

    @property
    def audit(self) -> AuditLog:
        return self.oversight.audit

    @property
    def call_gate(self) -> CallGate:
        return self.oversight.call_gate

    def metrics(self, scope: ProfileView | None = None) -> str:
        return self.report.metrics(scope)

    def history(self, scope: ProfileView | None = None) -> list[ServerHistory]:
        return self.report.history(scope)

    def status(self, scope: ProfileView | None = None, *, own_user: bool = False) -> StatusDocument:
        if scope is not None:
            return self.report.of_profile(scope, started=self._started, own_user=own_user)
        return self.report.whole(
            socket=self.socket_path, config=self.config_path, started=self._started
        )
