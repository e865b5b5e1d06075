"""``mcpd`` exactly as ``python -m mcpd`` runs it, plus a task census for the fault tests.

On SIGUSR1 the daemon's trio task tree is counted and the number sent as one
datagram (``CENSUS=tasks=N``) to the socket named by ``$MCPD_FAULTS_CENSUS``, so a
test can compare the count before and after a case without running the daemon in
its own process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from typing import Any

import trio

from mcpd.cli.main import main
from mcpd.starting import serve as serve_module

_TARGET = os.environ.pop("MCPD_FAULTS_CENSUS", "")
_run_daemon = serve_module._main


def count_tasks() -> int:
    root = trio.lowlevel.current_root_task()
    assert root is not None
    todo = [root]
    count = 0
    while todo:
        task = todo.pop()
        count += 1
        for nursery in task.child_nurseries:
            todo.extend(nursery.child_tasks)
    return count


async def _census() -> None:
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock,
        trio.open_signal_receiver(signal.SIGUSR1) as signals,
    ):
        async for _ in signals:
            with contextlib.suppress(OSError):
                sock.sendto(f"CENSUS=tasks={count_tasks()}".encode(), _TARGET)


async def _with_census(*args: Any) -> None:
    async with trio.open_nursery() as nursery:
        if _TARGET:
            nursery.start_soon(_census)
        await _run_daemon(*args)
        nursery.cancel_scope.cancel()


serve_module._main = _with_census  # type: ignore[assignment]

if __name__ == "__main__":
    main()  # exits with the daemon's status
