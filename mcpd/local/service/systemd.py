"""Talking to systemd without libsystemd: notify, watchdog, socket activation, child env.

Everything here degrades to a no-op when mcpd is not started by systemd, so the daemon
calls it unconditionally. The intended start-up order in ``mcpd serve`` is::

    logsetup.setup_logging(args.log, args.log_level)     # reads $JOURNAL_STREAM
    sd = systemd.SystemdEnv.take()                       # reads, then unsets, the rest
    listener = systemd.adopt_listener(sd.sockets, systemd.API_FDNAME)  # None: bind our own
    async with trio.open_nursery() as nursery:
        await nursery.start(systemd.run_watchdog, sd.notifier)
        await nursery.start(systemd.run_test_faults, sd.notifier, sd.faults, sd.wedge_seconds)
        ...
        sd.notifier.ready("serving N tools from M servers")
    # SIGHUP:  sd.notifier.reloading(); apply the new config; sd.notifier.ready(status)
    # SIGTERM: sd.notifier.stopping(); shut down
    # stdio children: the transport leaves MAIN_PROCESS_ONLY_VARS out of their env

The notify protocol is one datagram of ``KEY=value`` lines sent to ``$NOTIFY_SOCKET``
(see sd_notify(3)); socket activation passes listening fds from 3 on with
``$LISTEN_FDS``/``$LISTEN_PID``/``$LISTEN_FDNAMES`` (see sd_listen_fds(3)).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import stat
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import NamedTuple

import trio

from transports.stdio.process.launch import PARENT_ONLY_VARS

from ...config.loading.paths import API_FDNAME as API_FDNAME
from ...config.loading.paths import systemd_socket

logger = logging.getLogger("mcpd.systemd")

# Variables systemd hands to the main process only; the stdio transport keeps them from
# every server it starts, and scrub_environ() removes them from our own environment.
MAIN_PROCESS_ONLY_VARS: frozenset[str] = PARENT_ONLY_VARS

SD_LISTEN_FDS_START = 3

# A send to PID 1 normally completes at once. The timeout only bounds the worst case
# (the receiver's queue is full because the manager is busy): we would rather lose one
# notification than stall the event loop for long.
_SEND_TIMEOUT = 1.0


def scrub_environ(environ: MutableMapping[str, str] | None = None) -> None:
    """Remove the per-main-process variables from our own environment (``os.environ``
    by default, which also unsets them at the C level), so children spawned without an
    explicit ``env=`` do not inherit them. Call after everything has been read."""
    target = os.environ if environ is None else environ
    for name in MAIN_PROCESS_ONLY_VARS:
        target.pop(name, None)


def _monotonic_usec() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


class Notifier:
    """sd_notify over a datagram socket. Every method is a no-op without ``$NOTIFY_SOCKET``.

    Sending never raises: the daemon must not die because the manager is gone. The first
    failure is logged; later ones are counted silently (``failures``).

    A status line is never waited for: when the manager's queue is full it is kept
    (``held``) and goes with the next notification that is sent. Waiting up to
    ``_SEND_TIMEOUT`` for each one would stall the whole daemon once for every server
    that changes state while the manager is not reading.
    """

    def __init__(self, address: str | None, *, watchdog_usec: int | None = None) -> None:
        self.address = address or None
        self.watchdog_usec = watchdog_usec
        self.failures = 0
        self.held: str | None = None  # the last status line not sent yet
        self._sock: socket.socket | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        env = os.environ if environ is None else environ
        return cls(env.get("NOTIFY_SOCKET"), watchdog_usec=watchdog_usec(env))

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def _target(self) -> str | bytes:
        assert self.address is not None
        if self.address.startswith("@"):
            # Abstract namespace: the leading "@" stands for a NUL byte.
            return b"\0" + self.address[1:].encode()
        return self.address

    def notify(self, *assignments: str, wait: bool = True) -> bool:
        """Send ``KEY=value`` assignments in one datagram. True when it was sent.

        Without ``wait``, a datagram the manager has no room for now is not sent (and
        is not a failure)."""
        if self.address is None:
            return False
        has_status = any(a.startswith("STATUS=") for a in assignments)
        if self.held is not None and not has_status:
            assignments, has_status = (*assignments, self.held), True
        payload = "".join(a + "\n" for a in assignments).encode()
        try:
            if self._sock is None:
                if not (self.address.startswith(("/", "@"))):
                    # vsock: and other exotic forms are for VMs; mcpd runs as a service.
                    raise OSError(f"unsupported NOTIFY_SOCKET address {self.address!r}")
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                sock.settimeout(_SEND_TIMEOUT)
                self._sock = sock
            if wait:
                self._sock.sendto(payload, self._target())
            else:
                # A socket with a timeout waits for room even with MSG_DONTWAIT.
                self._sock.settimeout(0)
                try:
                    self._sock.sendto(payload, self._target())
                finally:
                    self._sock.settimeout(_SEND_TIMEOUT)
        except BlockingIOError:
            return False
        except OSError as exc:
            self.failures += 1
            if self.failures == 1:
                logger.warning("sd_notify to %s failed: %s", self.address, exc)
            return False
        if has_status:
            self.held = None
        return True

    def ready(self, status: str | None = None) -> bool:
        """Start-up (or a reload) is complete."""
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def status(self, text: str) -> bool:
        # One line: a newline would start a new assignment.
        line = "STATUS=" + " ".join(text.splitlines())
        self.held = None  # this one is newer
        if self.notify(line, wait=False):
            return True
        if self.address is not None:
            self.held = line
        return False

    def reloading(self) -> bool:
        """A reload begins; ``ready()`` must follow when it is done. systemd >= 253 wants
        MONOTONIC_USEC with it to tell this reload from an older one; older ones ignore it."""
        return self.notify("RELOADING=1", f"MONOTONIC_USEC={_monotonic_usec()}")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def watchdog_usec(environ: Mapping[str, str] | None = None) -> int | None:
    """The watchdog interval systemd expects, or None when there is no watchdog for us."""
    env = os.environ if environ is None else environ
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    if usec <= 0:
        return None
    pid = env.get("WATCHDOG_PID")
    if pid is not None:
        try:
            if int(pid) != os.getpid():
                return None  # meant for another process (we were forked or exec'd into)
        except ValueError:
            return None
    return usec


async def run_watchdog(
    notifier: Notifier, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Send WATCHDOG=1 every half interval for as long as the event loop runs.

    The pings come from a trio task on purpose: if some code blocks the loop, the pings
    stop and systemd kills and restarts us, which is exactly what the watchdog is for.
    Returns at once when there is no watchdog to feed.
    """
    if not notifier.enabled or notifier.watchdog_usec is None:
        task_status.started()
        return
    period = notifier.watchdog_usec / 2_000_000
    task_status.started()
    while True:
        notifier.watchdog()
        await trio.sleep(period)


# --- test-only fault injection -------------------------------------------------------------

FAULTS_VAR = "MCPD_TEST_FAULTS"
WEDGE_SECONDS_VAR = "MCPD_TEST_WEDGE_SECONDS"
KNOWN_FAULTS = frozenset({"wedge_on_sigusr2"})


def enabled_test_faults(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Faults enabled with ``MCPD_TEST_FAULTS=a,b``. Empty (the default) in production."""
    env = os.environ if environ is None else environ
    names = {n.strip() for n in env.get(FAULTS_VAR, "").split(",") if n.strip()}
    unknown = names - KNOWN_FAULTS
    if unknown:
        logger.warning("ignoring unknown %s: %s", FAULTS_VAR, ", ".join(sorted(unknown)))
    return frozenset(names & KNOWN_FAULTS)


async def run_test_faults(
    notifier: Notifier,
    faults: frozenset[str],
    wedge_seconds: float = 3600.0,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """FOR TESTS ONLY. With ``wedge_on_sigusr2`` in ``faults``, SIGUSR2 blocks the whole
    event loop in ``time.sleep`` for ``wedge_seconds``, as a buggy blocking call would, so
    tests can watch the systemd watchdog fire. Does nothing (returns) without faults.
    """
    if "wedge_on_sigusr2" not in faults:
        task_status.started()
        return
    logger.warning("TEST FAULT armed: SIGUSR2 will wedge the event loop for %ss", wedge_seconds)
    with trio.open_signal_receiver(signal.SIGUSR2) as signals:
        task_status.started()
        async for _ in signals:
            logger.warning("TEST FAULT: wedging the event loop for %ss", wedge_seconds)
            notifier.status("test fault: event loop wedged")
            time.sleep(wedge_seconds)  # noqa: ASYNC251  # blocking on purpose
            notifier.status("test fault: event loop running again")


# --- socket activation ---------------------------------------------------------------------


class ListenSocket(NamedTuple):
    name: str  # from LISTEN_FDNAMES; systemd's default is the socket unit's name
    sock: socket.socket


def listen_fds(environ: Mapping[str, str] | None = None) -> list[ListenSocket]:
    """The sockets systemd passed us (fds 3, 4, ...), or [] when none are for us.

    Each fd is marked close-on-exec: systemd passes them inheritable, and a server
    child must never hold our listening socket open.
    """
    env = os.environ if environ is None else environ
    try:
        if int(env.get("LISTEN_PID", "")) != os.getpid():
            return []
        count = int(env.get("LISTEN_FDS", ""))
    except ValueError:
        return []
    if count <= 0:
        return []
    names = env.get("LISTEN_FDNAMES", "").split(":") if env.get("LISTEN_FDNAMES") else []
    result: list[ListenSocket] = []
    for i in range(count):
        fd = SD_LISTEN_FDS_START + i
        try:
            os.set_inheritable(fd, False)
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                logger.warning("LISTEN_FDS: fd %d is not a socket; ignored", fd)
                continue
            sock = socket.socket(fileno=fd)
        except OSError as exc:
            logger.warning("LISTEN_FDS: fd %d unusable: %s", fd, exc)
            continue
        result.append(ListenSocket(names[i] if i < len(names) else "unknown", sock))
    return result


def adopt_listener(
    sockets: list[ListenSocket], name: str | None = None
) -> trio.SocketListener | None:
    """The first passed listening AF_UNIX stream socket (named ``name`` if given) as a
    ``trio.SocketListener``, or None. Other sockets are left alone."""
    for entry in sockets:
        sock = entry.sock
        if name is not None and entry.name != name:
            continue
        if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
            continue
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            continue
        return trio.SocketListener(trio.socket.from_stdlib_socket(sock))
    return None


@dataclass
class SystemdEnv:
    """What systemd told the main process, captured once."""

    notifier: Notifier
    sockets: list[ListenSocket] = field(default_factory=list)
    faults: frozenset[str] = frozenset()
    wedge_seconds: float = 3600.0
    # The agents' socket systemd gives (``paths.systemd_socket``): where mcpd listens
    # when neither --socket, the config nor $MCPD_SOCKET names one.
    socket_path: str | None = None

    @classmethod
    def take(cls, environ: MutableMapping[str, str] | None = None) -> SystemdEnv:
        """Read the notify socket, watchdog, passed sockets and test faults, then unset
        those variables so no child inherits them."""
        env = os.environ if environ is None else environ
        try:
            wedge = float(env.get(WEDGE_SECONDS_VAR, "3600"))
        except ValueError:
            wedge = 3600.0
        socket_path = systemd_socket(env)  # before listen_fds() takes the sockets
        captured = cls(
            notifier=Notifier.from_environ(env),
            sockets=listen_fds(env),
            faults=enabled_test_faults(env),
            wedge_seconds=wedge,
            socket_path=socket_path,
        )
        scrub_environ(env)
        return captured
