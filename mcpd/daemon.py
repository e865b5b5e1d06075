"""The daemon: config, registry, supervised servers and the agent socket, wired together,
with systemd readiness, signals and live reload."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket as stdsocket
import stat
from typing import Any

import trio

from protocol import jsonrpc as rpc
from transports.base import log_extra

from . import __version__
from .agents.api import Api
from .config.model import Config, ConfigError, load
from .host.statefile import FILE_NAME, StateKeeper, state_dir
from .host.systemd import Notifier, SystemdEnv, adopt_listener, run_test_faults, run_watchdog
from .registry.curation import ToolBudget
from .registry.table import Registry
from .servers.outage import iso
from .servers.supervisor import ReloadReport, Supervisor

logger = logging.getLogger("mcpd")


class DaemonError(Exception):
    """The daemon cannot start (socket taken, unusable path)."""


async def open_unix_listener(path: str, mode: int) -> trio.SocketListener:
    """Bind ``path`` with ``mode`` already set, replacing a stale socket file."""
    directory = os.path.dirname(path) or "."
    try:
        os.makedirs(directory, mode=0o755, exist_ok=True)
    except OSError as exc:
        raise DaemonError(f"cannot create the socket directory {directory!r}: {exc}") from None
    await _refuse_live_socket(path)
    sock = trio.socket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_STREAM)
    # Bind under a temporary name and rename into place, so the socket is never
    # reachable with the umask's permissions instead of ``mode``.
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    try:
        await sock.bind(tmp)
        os.chmod(tmp, mode)
        os.rename(tmp, path)
        sock.listen(512)
    except OSError as exc:
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise DaemonError(f"cannot listen on {path!r}: {exc.strerror or exc}") from None
    return trio.SocketListener(sock)


async def _refuse_live_socket(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise DaemonError(f"{path!r} exists and is not a socket; not replacing it")
    probe = trio.socket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_STREAM)
    try:
        with trio.move_on_after(2):
            await probe.connect(path)
            raise DaemonError(f"another mcpd is listening on {path}")
    except (ConnectionRefusedError, FileNotFoundError):
        pass  # a stale file left by a daemon that died
    finally:
        probe.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


class Daemon:
    def __init__(
        self, config: Config, *, config_path: str | None = None, sysd: SystemdEnv | None = None
    ) -> None:
        self.config = config
        self.config_path = config_path
        self.sysd = sysd or SystemdEnv(Notifier(None))
        self.registry = Registry(config.naming)
        self.supervisor = Supervisor(config, self.registry, on_change=self._changed)
        self.state = StateKeeper(
            os.path.join(state_dir(config), FILE_NAME), self.registry, self.supervisor
        )
        self.tool_budget = ToolBudget(config.daemon.max_tools)
        self.api = Api(self)
        self.ready = trio.Event()
        self.socket_path = config.socket_path()
        self._started = 0.0
        self._status_line = ""
        self._stop = trio.Event()
        self._reload_lock = trio.Lock()

    @property
    def notifier(self) -> Notifier:
        return self.sysd.notifier

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._started = trio.current_time()
        listener = adopt_listener(self.sysd.sockets)
        owned: os.stat_result | None = None
        if listener is None:
            listener = await open_unix_listener(self.socket_path, self.config.socket_mode())
            owned = os.lstat(self.socket_path)
        else:
            bound = listener.socket.getsockname()
            if isinstance(bound, str) and bound:
                self.socket_path = bound  # systemd's (mcpd.socket), whatever the config says
        try:
            async with trio.open_nursery() as nursery:
                await self.state.seed(self.config)
                await nursery.start(self.state.run)
                await nursery.start(self.supervisor.run)
                nursery.start_soon(self._signals)
                await nursery.start(run_watchdog, self.notifier)
                await nursery.start(
                    run_test_faults, self.notifier, self.sysd.faults, self.sysd.wedge_seconds
                )
                await self.supervisor.wait_started(
                    self._started + self.config.daemon.startup_deadline
                )
                # Agents are served once every server has had its first attempt: with socket
                # activation the first connection (which started us) waits in the backlog
                # instead of seeing only the tools of the servers that happened to be quick.
                await nursery.start(self.api.serve, listener)
                self.ready.set()
                self._status_line = self.supervisor.summary()
                self.notifier.ready(self._status_line)
                logger.info(
                    "listening on %s; %s",
                    self.socket_path,
                    self._status_line,
                    extra=log_extra(None),
                )
                task_status.started()
                await self._stop.wait()
                self.notifier.stopping()
                await self.api.end_subscriptions()
                logger.info("stopping", extra=log_extra(None))
                nursery.cancel_scope.cancel()
        finally:
            if owned is not None:
                _unlink_if_ours(self.socket_path, owned)

    def stop(self) -> None:
        self._stop.set()

    async def _signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGHUP, signal.SIGTERM, signal.SIGINT) as sigs:
            async for signum in sigs:
                if signum == signal.SIGHUP:
                    with contextlib.suppress(rpc.RPCError):
                        await self.reload()
                else:
                    self.stop()

    async def reload(self) -> ReloadReport:
        async with self._reload_lock:
            if self.config_path is None:
                raise rpc.RPCError(-32000, "mcpd was started without a config file to re-read")
            try:
                new = load(self.config_path)
            except ConfigError as exc:
                logger.error(
                    "reload rejected, keeping the running configuration: %s",
                    exc,
                    extra=log_extra(None, "reload", str(exc)),
                )
                raise rpc.RPCError(-32000, f"config rejected: {exc}") from None
            if new.daemon.socket is not None and new.socket_path() != self.socket_path:
                logger.warning(
                    "the socket path changed; that takes a restart, not a reload",
                    extra=log_extra(None, "reload"),
                )
            self.notifier.reloading()
            try:
                report = await self.supervisor.reload(new)
                self.config = new
                self.tool_budget.limit = new.daemon.max_tools
                # Added and changed servers get their first attempt before READY=1 and
                # before `mcpd reload` returns, as at start-up.
                await self.supervisor.wait_started(
                    trio.current_time() + new.daemon.startup_deadline
                )
            finally:
                self._status_line = self.supervisor.summary()
                self.notifier.ready(self._status_line)
            return report

    def _changed(self, alias: str) -> None:
        self.api.tools_changed()
        self.state.changed()
        self.tool_budget.check(len(self.registry.listing()))
        if self.ready.is_set():
            line = self.supervisor.summary()
            if line != self._status_line:
                self._status_line = line
                self.notifier.status(line)

    def server_states(self) -> list[dict[str, Any]]:
        out = []
        for alias in sorted(self.supervisor.runners):
            runner = self.supervisor.runners[alias]
            state = runner.state
            entry: dict[str, Any] = {
                "server": alias,
                "state": state,
                "available": runner.available,
            }
            if not entry["available"]:
                o = runner.outage()
                entry.update(reason=o.reason, since=iso(o.since), retry_at=iso(o.retry_at))
            out.append(entry)
        return out

    def status(self) -> dict[str, Any]:
        servers = []
        for s in self.supervisor.status():
            s = dict(s)
            s["since"] = iso(s["since"])
            s["retry_at"] = iso(s["retry_at"])
            servers.append(s)
        return {
            "daemon": {
                "version": __version__,
                "pid": os.getpid(),
                "socket": self.socket_path,
                "config": self.config_path,
                "uptime_s": round(trio.current_time() - self._started, 1),
                "connections": len(self.api.connections),
                "tools": len(self.registry.listing()),
                "max_tools": self.tool_budget.limit,
                "summary": self.supervisor.summary(),
                "state_file": self.state.path,
                "warnings": [
                    w for w in [self.tool_budget.warning(len(self.registry.listing()))] if w
                ],
            },
            "servers": servers,
        }


def _unlink_if_ours(path: str, ours: os.stat_result) -> None:
    """Remove the socket file we bound, unless another one (say mcpd.socket's) has
    taken its place since."""
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if stat.S_ISSOCK(st.st_mode) and (st.st_dev, st.st_ino) == (ours.st_dev, ours.st_ino):
            os.unlink(path)
