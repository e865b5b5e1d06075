"""Sandboxed servers started from threads of mcpd that put them in what they are born in:
a system call filter that refuses them the kernel's keyrings (``keyring_filter``) and,
where the kernel scopes one, a Landlock domain (``landlock``).

A filter, like a domain, is a thread's, and what a thread starts is born under it. So
rather than put each server's command line behind a step that sets them up and then
execs bubblewrap (an interpreter started for every server), one thread of mcpd sets
them up once and starts every sandboxed server: bubblewrap, the server and all it
starts are under them, while mcpd's other threads, the one running the event loop
among them, stay as they were. Two such threads at most: one in the domain and under
the filter, one under the filter alone (for a server that joins a network namespace
before it enters the domain, and on a kernel without scoping). Each lives as long as
mcpd, as it must: a child's ``PR_SET_PDEATHSIG`` fires when the thread that started it
exits.

A thread does nothing else. In the domain it may not connect to an abstract socket
bound outside it nor signal a process outside it, which starting a child needs
neither of; mcpd's own thread signals the servers, from outside, as before.

No trio here: ``mcpd serve`` starts servers before it imports the event loop.
"""

from __future__ import annotations

import queue
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
        landlock.enter()
    except (OSError, landlock.Unavailable) as exc:
        raise _Refused(f"cannot scope the sandbox with Landlock: {exc}") from None


class ThreadStarts:
    """Starts from one thread under the keyring filter, and in a Landlock domain too when
    ``scoped``."""

    def __init__(self, *, scoped: bool) -> None:
        self._scoped = scoped
        self._jobs: queue.SimpleQueue[_Job[object]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._refused: str | None = None  # why the thread is not set up

    def run(self, start: Callable[[], T]) -> T:
        """``start()`` called in the thread, and what it returned (or raised). Waits for
        it: starting a child takes the time it takes the calling thread now. Raises
        OSError when the thread could not be set up: a server meant to be born under
        the filter (or in the domain) is not started without it."""
        with self._lock:
            if self._thread is None:
                kind = "confined" if self._scoped else "keyless"
                self._thread = threading.Thread(
                    target=self._serve, name=f"mcpd-{kind}-starts", daemon=True
                )
                self._thread.start()
        job = _Job(start)
        self._jobs.put(job)  # type: ignore[arg-type]
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.value  # type: ignore[return-value]

    def _serve(self) -> None:
        try:
            if self._scoped:
                _scope()
            _refuse_keyrings()
        except _Refused as exc:
            self._refused = str(exc)
        while True:
            job = self._jobs.get()
            try:
                if self._refused is not None:
                    # No errno: one would make it a PermissionError, which reads as a
                    # command that is not executable.
                    raise OSError(self._refused)
                job.value = job.start()
            except BaseException as exc:  # handed to the caller, who raises it
                job.error = exc
            finally:
                job.done.set()


confined = ThreadStarts(scoped=True)
keyless = ThreadStarts(scoped=False)
