"""Sandboxed servers started from threads of mcpd that put them in what they are born in:
a system call filter that refuses them the kernel's keyrings (``keyring_filter``) and,
where the kernel scopes one, a Landlock domain (``landlock``).

A filter, like a domain, is a thread's, and what a thread starts is born under it. So
rather than put each server's command line behind a step that sets them up and then
execs bubblewrap (an interpreter started for every server), a thread of mcpd sets them
up and starts the server: bubblewrap, the server and all it starts are under them,
while mcpd's other threads, the one running the event loop among them, stay as they
were. A child's ``PR_SET_PDEATHSIG`` fires when the thread that started it exits, so
that thread lives as long as what it started.

A domain scopes abstract sockets and signals to itself, not to one server: servers
born in one domain would reach each other's abstract sockets (and could bind a name
another one dials) and signal each other. So each server in a domain gets one of its
own (``Confined``): a thread made for its start enters a new domain, nested in
whatever the asking thread is in, starts the server, and waits for it to exit. The
filter alone scopes nothing between servers; one thread under it starts every server
that needs no domain here (``Keyless``: a server that joins a network namespace enters
its domain after, through a step of its command line; on a kernel without scoping,
there is none).

Such a thread does nothing else. In its domain it may not connect to an abstract
socket bound outside it nor signal a process outside it, which starting a child needs
neither of; mcpd's own thread signals the servers, from outside, as before.

No trio here: ``mcpd serve`` starts servers before it imports the event loop.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from . import keyring_filter, landlock

T = TypeVar("T")


class _Job(Generic[T]):
    __slots__ = ("done", "error", "start", "value")

    def __init__(self, start: Callable[[], T]) -> None:
        self.start = start
        self.done = threading.Event()
        self.value: T | None = None
        self.error: BaseException | None = None

    def outcome(self) -> T:
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


class _Refused(Exception):
    """The thread could not be set up; the message says what and why."""


def _refuse_keyrings() -> None:
    try:
        keyring_filter.enter()
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise _Refused(f"cannot refuse the kernel's keyrings to the sandbox: {why}") from None


def _scope() -> None:
    try:
        landlock.restrict_self()
    except (OSError, landlock.Unavailable) as exc:
        raise _Refused(f"cannot scope the sandbox with Landlock: {exc}") from None


def _refusal(why: str) -> OSError:
    # No errno: one would make it a PermissionError, which reads as a command that is
    # not executable.
    return OSError(why)


class Keyless:
    """Starts from one thread under the keyring filter, which lives as long as mcpd."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job[object]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._refused: str | None = None  # why the thread is not set up

    def run(self, start: Callable[[], T]) -> T:
        """``start()`` called in the thread, and what it returned (or raised). Waits for
        it: starting a child takes the time it takes the calling thread now. Raises
        OSError when the thread could not be set up: a server meant to be born under
        the filter is not started without it."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="mcpd-keyless-starts", daemon=True
                )
                self._thread.start()
        job = _Job(start)
        self._jobs.put(job)  # type: ignore[arg-type]
        return job.outcome()

    def _serve(self) -> None:
        try:
            _refuse_keyrings()
        except _Refused as exc:
            self._refused = str(exc)
        while True:
            job = self._jobs.get()
            try:
                if self._refused is not None:
                    raise _refusal(self._refused)
                job.value = job.start()
            except BaseException as exc:  # handed to the caller, who raises it
                job.error = exc
            finally:
                job.done.set()


class Confined:
    """Starts each child from a thread of its own, in a Landlock domain of its own and
    under the keyring filter; the thread lives until the child exits."""

    def run(self, start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        """``start()`` called in a new thread, in a new domain, and the child it
        returned (or what it raised). Raises OSError when the thread could not enter
        the domain or the filter: a server meant to be born in them is not started
        without them."""
        job = _Job(start)
        threading.Thread(
            target=self._serve, args=(job,), name="mcpd-confined-start", daemon=True
        ).start()
        return job.outcome()

    def _serve(self, job: _Job[subprocess.Popen[bytes]]) -> None:
        try:
            try:
                _scope()
                _refuse_keyrings()
            except _Refused as exc:
                raise _refusal(str(exc)) from None
            child = job.value = job.start()
        except BaseException as exc:  # handed to the caller, who raises it
            job.error = exc
            return
        finally:
            job.done.set()
        # Until it exits, without reaping it: its exit status is the caller's. A pid
        # reaped first reads as no child, which is as good as an exit.
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)


confined = Confined()
keyless = Keyless()
