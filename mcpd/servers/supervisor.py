"""All configured servers: one supervised runner task each, started, stopped and
reloaded by diffing configs so unchanged servers are never touched.

A reload comes in two steps, so that the daemon can put the rest of a config in force
between them: ``adopt`` takes the new config up for the servers it keeps as they are,
and ``restart`` stops the removed and changed ones (each waits for its calls in flight)
and starts the added and changed ones."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import trio

from protocol.jsonrpc import messages as rpc
from protocol.shown.logfields import log_extra
from transports.stdio.sandbox import secret_folders

from ..config.sandboxing.per_server import child_env, home_of, sandbox_of
from ..config.tables.model import Config
from ..config.tables.servertable import ServerConfig
from ..policy.redaction.guard import SecretGuard
from ..policy.redaction.masking import KnownSecrets
from ..registry.tables.catalog import Catalog
from ..reloading.outcome import ReloadReport
from ..server_row import ResetOutcome, ServerRow
from .calling.queue_bytes import QueueBytes
from .life.lazy import runner_of
from .life.runner import Runner
from .life.server_parts import ServerParts
from .life.transport_factory import TransportFactory, open_transport
from .status.outage import Outage, clock_time
from .status.state import counts, states_summary
from .status.status_of import status_of

logger = logging.getLogger("mcpd.supervisor")

# Why a server is not there, as a call to it is told.
REMOVED: Final = "removed from the configuration"
RESTARTING: Final = "restarting for a changed configuration"
# A server restarted by a reload because its own table changed: no more need be said.
OWN_TABLE: Final = "its configuration changed"
# Names a journal line gives of one kind (servers added, settings in force); a reload of
# many more says how many it leaves out.
_NAMED: Final = 8


def reload_said(report: ReloadReport) -> str:
    """What a reload did, for the journal: the servers by name, those untouched
    counted, and the settings put in force or left for a restart."""
    parts = [
        f"{what} {_some(names)}"
        for what, names in (
            ("added", report.added),
            ("removed", report.removed),
            ("restarted (changed)", [_why(a, report.why) for a in report.changed]),
        )
        if names
    ]
    parts.append(f"{len(report.unchanged)} unchanged")
    if report.settings:
        parts.append(f"in force now: {_some(report.settings)}")
    if report.new_connections:
        parts.append(f"for new connections: {_some(report.new_connections)}")
    if report.restart:
        parts.append(f"not applied until mcpd restarts: {_some(report.restart)}")
    return "; ".join(parts)


def _why(alias: str, why: dict[str, str]) -> str:
    """A server restarted, with why where its own table did not change."""
    said = why.get(alias)
    return alias if said is None else f"{alias} ({said})"


def _some(names: list[str]) -> str:
    """``names`` joined, past ``_NAMED`` of them cut to a count."""
    shown = ", ".join(names[:_NAMED])
    rest = len(names) - _NAMED
    return shown if rest <= 0 else f"{shown} and {rest} more"


def _restarts(alias: str, old: Config, new: Config) -> str | None:
    """Why a reload from ``old`` to ``new`` restarts the server (None: it does not):
    its table changed (``OWN_TABLE``), or, for a stdio server, the sandbox it runs in
    (the daemon's level or limits it takes, what every server's sandbox hides, such as
    a new secret file) or the environment it gets (a variable it inherits that became
    another server's secret), which a running process keeps until it is started again;
    or what its lists may hold, which its lists were read against as it connected."""
    was, now = old.servers[alias], new.servers[alias]
    if was != now:
        return OWN_TABLE
    if old.list_limits(alias) != new.list_limits(alias):
        return "the limits on what its lists may hold changed"
    if now.kind != "stdio":
        return None
    before, after = sandbox_of(alias, was, old), sandbox_of(alias, now, new)
    if child_env(alias, was, old, before) != child_env(alias, now, new, after):
        return "the environment it gets changed"
    if before.level == after.level == "off":  # nothing hidden: only its limits count
        return "the limits of its sandbox changed" if before.limits != after.limits else None
    return "its sandbox changed" if before != after else None


class Supervisor:
    def __init__(
        self,
        config: Config,
        registry: Catalog,
        on_change: Callable[[str], None] = lambda alias: None,
        transport_factory: TransportFactory = open_transport,
        guard: SecretGuard | None = None,
    ) -> None:
        self.config = config
        # What every server sends passes it (``policy.redaction.guard``).
        self.guard = guard or SecretGuard(KnownSecrets())
        self.registry = registry
        self.on_change = on_change
        self.transport_factory = transport_factory
        self.servers: dict[str, ServerParts] = {}
        # The bytes kept by the calls waiting for every server, counted together.
        self.waiting = QueueBytes()
        self._scopes: dict[str, trio.CancelScope] = {}
        self._done: dict[str, trio.Event] = {}
        self._stopping: dict[str, str] = {}  # alias -> why, while it is stopped
        # The program each stdio alias last ran, kept after its removal: its home is.
        self._programs: dict[str, tuple[str, ...]] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for alias, cfg in self.config.servers.items():
                if cfg.enabled:
                    self._start(alias, cfg)
            task_status.started()
            await trio.sleep_forever()

    def _start(self, alias: str, cfg: ServerConfig) -> None:
        assert self._nursery is not None
        if cfg.command is not None:
            self._programs[alias] = (cfg.command, *cfg.args)
        self.registry.set_rules(alias, cfg.tools)
        self.registry.prompts.set_rules(alias, cfg.prompts)
        server = ServerParts(
            alias,
            cfg,
            self.config,
            self.registry,
            self.on_change,
            guard=self.guard,
            waiting=self.waiting,
        )
        scope = trio.CancelScope()
        done = trio.Event()
        self.servers[alias] = server
        self._scopes[alias] = scope
        self._done[alias] = done
        runner = runner_of(server, self.transport_factory)
        self._nursery.start_soon(self._run_one, runner, scope, done, name=f"server:{alias}")

    async def _run_one(self, runner: Runner, scope: trio.CancelScope, done: trio.Event) -> None:
        try:
            with scope:
                await runner.run()
        finally:
            done.set()

    def processes(self) -> dict[int, tuple[str, str]]:
        """The running stdio servers' processes: pid -> (alias, start mark)."""
        return {
            r.process.pid: (alias, r.process.mark)
            for alias, r in self.servers.items()
            if r.process is not None
        }

    async def wait_started(self, deadline: float) -> None:
        """Until every server had its first attempt, or the deadline passed."""
        with trio.move_on_at(deadline):
            for server in list(self.servers.values()):
                await server.first_attempt.wait()

    async def stop(self, alias: str, reason: str) -> None:
        """Stop one server: in-flight calls get a grace period, then an error result.
        The calls waiting for a slot, and every call to it meanwhile, are refused with
        ``reason`` (``absent``), never sent."""
        server = self.servers.pop(alias)
        server.downtime.last_error = reason
        self._stopping[alias] = reason
        server.scheduler.stop_sending(Outage(alias, "stopped", reason))
        try:
            with trio.move_on_after(self.config.daemon.call_timeout):
                await server.scheduler.wait_idle()
            self._scopes.pop(alias).cancel()
            await self._done.pop(alias).wait()
        finally:
            del self._stopping[alias]

    def absent(self, alias: str) -> str:
        """Why ``alias`` is not there: it is being stopped (and why), or it was removed."""
        return self._stopping.get(alias, REMOVED)

    def adopt(self, new: Config) -> ReloadReport:
        """Put ``new`` in force for every server it keeps as it is, and say which
        servers ``restart`` is to stop and start: nothing is stopped yet."""
        old = self.config
        old_on = {a: c for a, c in old.servers.items() if c.enabled}
        new_on = {a: c for a, c in new.servers.items() if c.enabled}
        both = sorted(old_on.keys() & new_on.keys())
        why = {
            a: w
            for a in both
            if (w := _restarts(a, old, new) or self._uncovered(a) or self._not_started(a))
        }
        report = ReloadReport(
            added=sorted(new_on.keys() - old_on.keys()),
            removed=sorted(old_on.keys() - new_on.keys()),
            changed=[a for a in both if a in why],
            unchanged=[a for a in both if a not in why],
            why={a: w for a, w in why.items() if w != OWN_TABLE},
        )
        for alias in [*report.added, *report.changed]:
            self._say_home_kept(alias, new.servers[alias])
        self.config = new
        for alias in report.unchanged:
            self.servers[alias].config = new
        if new.naming != old.naming:
            self.registry.rename(new.naming)
        return report

    def _say_home_kept(self, alias: str, cfg: ServerConfig) -> None:
        """Say that a server given another program than its alias last ran starts in the
        home that program left (mcpd never deletes one: it may hold a server's data)."""
        was = self._programs.get(alias)
        if cfg.command is None or was is None or was == (cfg.command, *cfg.args):
            return
        home = home_of(alias, self.config)
        said = (
            f"its home {home} is kept from the program the alias ran before ({was[0]}), with "
            "what that left there; delete it while the server is removed to start afresh"
        )
        logger.info("%s: %s", alias, said, extra=log_extra(alias, "home_kept", said))

    def _uncovered(self, alias: str) -> str | None:
        """Why the server restarts when a file its sandbox hid by name only is another
        file now (renamed onto that name, or created there), which the running server
        could read; None when none is. Whether the new file reads as the old one did
        does not matter: the server was to read neither, and the new one is not hidden
        from it until it starts again."""
        server = self.servers.get(alias)
        started = server.process if server is not None else None
        files = secret_folders.changed(started.covered) if started is not None else []
        if not files:
            return None
        said = f"restarting: {', '.join(files)} changed since it started"
        logger.info("%s: %s", alias, said, extra=log_extra(alias, "sandbox_uncovered", said))
        return f"it could see what is now at {', '.join(files)}, which changed since it started"

    def _not_started(self, alias: str) -> str | None:
        """Why the server restarts when it waits to be tried again after a start that
        failed before its program ran (its command not found, a path it is granted or
        its working directory not there): what it lacked may be there now, which is
        what a reload is often run for, and its wait may be as long as ``backoff_cap``.
        None for any other server."""
        server = self.servers.get(alias)
        if server is None or server.phase != "waiting" or not server.downtime.not_started:
            return None
        return "it could not be started, and is tried again at once"

    async def restart(self, report: ReloadReport) -> None:
        """Stop the servers ``adopt`` found removed or changed (each call in flight
        gets its grace period) and start the added ones; a changed one starts again as
        soon as its own calls are over, whatever the others still wait for."""
        async with trio.open_nursery() as nursery:
            for alias in report.removed:
                nursery.start_soon(self.stop, alias, REMOVED)
            for alias in report.changed:
                nursery.start_soon(self._restart_one, alias)
        for alias in report.removed:
            self.registry.remove(alias)
        # Once the removed are gone: one added in a removed one's place (a server
        # renamed) may need what it held.
        for alias in report.added:
            self._start(alias, self.config.servers[alias])
        logger.info(
            "configuration reloaded: %s",
            reload_said(report),
            extra=log_extra(None, "reload"),
        )
        for alias in report.removed:
            self.on_change(alias)

    async def _restart_one(self, alias: str) -> None:
        # Started before anything else runs: no call finds it neither stopping nor there.
        await self.stop(alias, RESTARTING)
        self._start(alias, self.config.servers[alias])

    def reset(
        self, alias: str, who: str, only: Callable[[str], bool] | None = None
    ) -> ResetOutcome:
        """``mcpd reset``: the server's circuit closed on trial, as ``who`` asked, of
        the servers whose alias ``only`` admits (a profile's: the others are not there
        for it, as in its ``mcpd status``)."""
        server = self.servers.get(alias)
        if server is None or (only is not None and not only(alias)):
            known = ", ".join(a for a in sorted(self.servers) if only is None or only(a))
            known = known or "none"
            raise rpc.RPCError(
                rpc.INVALID_PARAMS, f"no server named {alias!r} is running (servers: {known})"
            )
        was, circuit = server.state, server.breaker.status(trio.current_time()).state
        reset = server.reset_circuit(who)
        # A server waiting to be started or connected again is refused for that wait,
        # the restart's, which no circuit holds: said with its end, as reset leaves it.
        waiting = server.phase == "waiting"
        next_try = clock_time(server.outage().retry_at) if waiting else None
        return ResetOutcome(
            server=alias,
            was=was,
            circuit=circuit,
            reset=reset,
            state=server.state,
            waiting=waiting,
            next_try=next_try,
        )

    async def reload(self, new: Config) -> ReloadReport:
        report = self.adopt(new)
        await self.restart(report)
        return report

    def status(self, only: Callable[[str], bool] | None = None) -> list[ServerRow]:
        """Each server's row in ``mcpd status`` (of those whose alias ``only`` admits)."""
        return [status_of(self.servers[a]) for a in sorted(self.servers) if only is None or only(a)]

    def summary(self, only: Callable[[str], bool] | None = None) -> str:
        """One line for ``mcpd status`` and the journal: "5 servers: 4 ready, 1 open
        (tickets)"."""
        return states_summary(
            {alias: r.state for alias, r in self.servers.items() if only is None or only(alias)}
        )

    def counts(self) -> str:
        """One line for systemd's STATUS=, without the servers' names (``state.counts``)."""
        return counts({alias: r.state for alias, r in self.servers.items()})

    def outages(
        self, only: Callable[[str], bool] | None = None, *, own_user: bool = False
    ) -> list[str]:
        """One sentence per unavailable server (of those whose alias ``only`` admits),
        for discover/initialize instructions, as an agent of the daemon's own user or
        root (``own_user``) or any other is told it (``Outage.for_agent``)."""
        out = []
        for alias in sorted(self.servers):
            server = self.servers[alias]
            if not server.available and (only is None or only(alias)):
                out.append(server.outage().for_agent(own_user).sentence())
        return out
