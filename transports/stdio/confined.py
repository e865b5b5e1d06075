"""Sandboxed servers started from a thread in a Landlock domain (``landlock``).

A domain is a thread's, and what a thread starts is born in it. So rather than put
each server's command line behind a step that enters the domain and then execs
bubblewrap (an interpreter started for every server), one thread of mcpd enters it
once and starts every sandboxed server: bubblewrap, the server and all it starts are
in the domain, while mcpd's other threads, the one running the event loop among them,
stay out of it. The thread lives as long as mcpd, as it must: a child's
``PR_SET_PDEATHSIG`` fires when the thread that started it exits.

The thread does nothing else. In the domain it may not connect to an abstract socket
bound outside it nor signal a process outside it, which starting a child needs
neither of; mcpd's own thread signals the servers, from outside, as before.

No trio here: ``mcpd serve`` starts servers before it imports the event loop.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from . import landlock

T = TypeVar("T")


class _Job(Generic[T]):
    __slots__ = ("done", "error", "start", "value")

    def __init__(self, start: Callable[[], T]) -> None:
        self.start = start
        self.done = threading.Event()
        self.value: T | None = None
        self.error: BaseException | None = None


class ConfinedStarts:
    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job[object]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._refused: str | None = None  # why the thread is not in the domain

    def run(self, start: Callable[[], T]) -> T:
        """``start()`` called in the domain's thread, and what it returned (or raised).
        Waits for it: starting a child takes the time it takes the calling thread now.
        Raises OSError when the thread could not enter the domain: a server meant to
        be in one is not started without it."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="mcpd-confined-starts", daemon=True
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
            landlock.enter()
        except (OSError, landlock.Unavailable) as exc:
            self._refused = f"cannot scope the sandbox with Landlock: {exc}"
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


starts = ConfinedStarts()
