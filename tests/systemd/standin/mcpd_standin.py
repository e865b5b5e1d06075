"""Stand-in for `mcpd serve` built on mcpd.local.service.systemd and
mcpd.local.service.journal and logsetup, for checking the shipped unit files under a real systemd
before the daemon exists: socket activation, READY/RELOADING/STOPPING, the watchdog (and
its test fault), journald fields, and the environment a child process sees."""

import logging
import os
import signal
import socket
import sys

import trio

from mcpd.local.service import journal, logsetup, systemd
from protocol.shown.logfields import log_extra

log = logging.getLogger("mcpd.standin")


async def handle(stream: trio.SocketStream) -> None:
    await stream.send_all(f"pong {os.getpid()}\n".encode())
    await stream.aclose()


async def main() -> int:
    logsetup.setup_logging("auto", "info")
    sd = systemd.SystemdEnv.take()
    listener = systemd.adopt_listener(sd.sockets, systemd.API_FDNAME)
    if listener is None:
        log.error("no listening socket named %r was passed", systemd.API_FDNAME)
        return 1
    log.info("log handler: %s", type(logging.getLogger().handlers[-1]).__name__)
    async with trio.open_nursery() as nursery:
        await nursery.start(systemd.run_watchdog, sd.notifier)
        await nursery.start(systemd.run_test_faults, sd.notifier, sd.faults, sd.wedge_seconds)
        nursery.start_soon(trio.serve_listeners, handle, [listener])
        stderr = ["Traceback (most recent call last):", "RuntimeError: no database"]
        log.warning(
            "server tickets is down",
            extra=log_extra("tickets", "outage", "exited with status 1", stderr),
        )
        for i in range(3):
            log.info("tickets stderr %d", i, extra=log_extra("tickets", "stderr"))
        # An entry too big for one datagram (the send buffer is shrunk to make sure)
        # has to reach journald through a sealed memfd.
        handler = logging.getLogger().handlers[-1]
        if isinstance(handler, journal.JournalHandler):
            handler._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        big = [f"line {i:05d} " + "x" * 90 for i in range(3000)]
        log.error("big crash", extra=log_extra("big", "crash_loop", "crashed 5 times", big))
        env = (await trio.run_process(["env"], capture_stdout=True)).stdout.decode()
        leaked = sorted(k for k in systemd.MAIN_PROCESS_ONLY_VARS if f"\n{k}=" in "\n" + env)
        log.info("child env leaks: %s", leaked or "none")
        sd.notifier.ready("serving")
        with trio.open_signal_receiver(signal.SIGHUP, signal.SIGTERM) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    sd.notifier.reloading()
                    log.info("reloaded", extra={"mcpd_event": "reload"})
                    sd.notifier.ready("serving (reloaded)")
                else:
                    sd.notifier.stopping()
                    log.info("stopping")
                    nursery.cancel_scope.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main))
