"""``mcpd serve``: run the daemon until SIGTERM, with the demo servers if asked."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import trio

from transports.errors import single_exceptions
from transports.stdio.process import early, pidgroup
from transports.stdio.process.child import signal_group, spawn

from ..config.loading.load import load, parse_config
from ..config.loading.paths import daemon_socket_path
from ..config.tables.model import EX_CONFIG, Config, ConfigError
from ..daemon import Daemon
from ..local import heap
from ..local.service.systemd import SystemdEnv, adopt_listener
from ..reloading.outcome import ReloadReport
from .cannot_start import DaemonError
from .config_hold import ConfigHold
from .listening import Listening
from .prestart import state_found, stop_unclaimed

logger = logging.getLogger("mcpd")


def serve(
    config: Config | None,
    config_path: str | None,
    *,
    demo: bool,
    socket: str | None = None,
    config_error: ConfigError | None = None,
    listening: Listening | None = None,
) -> int:
    """``config_error``: why ``config_path`` could not be loaded (``config`` is None);
    then mcpd serves only if systemd passed it its socket, as a ``ConfigHold``.
    ``listening``: the sockets bound before any server was started (``prestart``)."""
    sysd = SystemdEnv.take()
    hold = None
    if config_error is not None:
        listener = adopt_listener(sysd.sockets)
        if listener is None or config_path is None:
            return EX_CONFIG  # nothing would start it again: the error is final
        hold = (ConfigHold(config_path, config_error, load, sysd.notifier), listener)
    # The modules and the config are here for good: frozen before the servers start,
    # the collections their lists set off do not walk them again and again, which
    # with many servers of many tools is a large part of the start-up's CPU.
    heap.settle()
    try:
        trio.run(_main, config, config_path, demo, socket, sysd, hold, listening)
    except DaemonError as exc:
        logger.error("%s", exc)
        return exc.exit_code
    except ConfigError as exc:
        logger.error("config error: %s", exc)
        return EX_CONFIG
    finally:
        early.discard()  # started before the loop, for a daemon that did not get that far
        pidgroup.close()
        if listening is not None:
            listening.close()  # what a daemon that did not get that far left unserved
    return 0


async def _main(
    config: Config | None,
    config_path: str | None,
    demo: bool,
    socket: str | None,
    sysd: SystemdEnv,
    hold: tuple[ConfigHold, trio.SocketListener] | None,
    listening: Listening | None,
) -> None:
    given = socket
    if demo:
        socket = daemon_socket_path(given, None, systemd=sysd.socket_path)
        async with demo_config(socket) as cfg:
            await Daemon(cfg, sysd=sysd, on_settled=heap.settle).run()
        return

    def socket_for(new: Config) -> str:
        # Where a restart with the reloaded config would listen: the same rule again.
        return daemon_socket_path(given, new.daemon.socket, systemd=sysd.socket_path)

    with single_exceptions():
        async with trio.open_nursery() as nursery:
            if hold is not None:
                # The daemon adopts systemd's socket again, the one the hold leaves open.
                config = await nursery.start(hold[0].run, hold[1])
            assert config is not None
            config = state_found(config)
            config = msgspec.structs.replace(
                config, daemon=msgspec.structs.replace(config.daemon, socket=socket_for(config))
            )
            daemon = Daemon(
                config,
                config_path=config_path,
                sysd=sysd,
                on_settled=heap.settle,
                socket_for=socket_for,
                listening=listening,
            )
            await nursery.start(daemon.run)
            if hold is not None:
                added = sorted(config.servers)
                hold[0].handed_on(ReloadReport(added=added, removed=[], changed=[], unchanged=[]))
            stop_unclaimed()


@contextlib.asynccontextmanager
async def demo_config(socket: str | None = None) -> AsyncIterator[Config]:
    """The bundled demo: ``notes`` over stdio, ``tickets`` over HTTP on a free port."""
    proc = spawn(
        [
            sys.executable,
            "-m",
            "mcpd.demo.tickets",
            "--http",
            "127.0.0.1:0",
            "--ready-file",
            "/dev/stdout",
        ],
        stdin=False,
        stderr=False,
    )
    try:
        assert proc.stdout is not None
        port = await _read_port(proc.stdout)
        # A state directory of its own: the demo's lists must not replace those an
        # installed mcpd (or the user's own) keeps in the default one.
        with tempfile.TemporaryDirectory(prefix="mcpd-demo-") as state:
            daemon: dict[str, Any] = {"state_dir": state}
            if socket:
                daemon["socket"] = socket
            data: dict[str, Any] = {
                "daemon": daemon,
                "servers": {
                    "notes": {"command": sys.executable, "args": ["-m", "mcpd.demo.notes"]},
                    "tickets": {"url": f"http://127.0.0.1:{port}/mcp"},
                },
            }
            logger.info("demo: tickets serves HTTP on 127.0.0.1:%d (pid %d)", port, proc.pid)
            yield parse_config(data)  # read from no file
    finally:
        with trio.CancelScope(shield=True):
            signal_group(proc.pid, signal.SIGTERM)
            with trio.move_on_after(3):
                await proc.wait()
            signal_group(proc.pid, signal.SIGKILL)


async def _read_port(stream: trio.abc.ReceiveStream) -> int:
    buf = b""
    with trio.fail_after(20):
        while b"\n" not in buf:
            chunk = await stream.receive_some(64)
            if not chunk:
                raise DaemonError("the tickets demo server exited before it was ready")
            buf += chunk
    return int(buf.split(b"\n", 1)[0].strip())
