"""A Unix socket whose listen queue is full, as a flood of connections leaves the
daemon's, for the tests of the clients that must wait for room in it."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def full_queue(path: Path) -> Iterator[socket.socket]:
    """A listener on ``path`` that accepts nothing by itself, its queue filled with
    connections nobody uses; the listener, to accept from."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fillers: list[socket.socket] = []
    try:
        listener.bind(str(path))
        listener.listen(0)
        while True:
            filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            filler.setblocking(False)
            try:
                filler.connect(str(path))
            except BlockingIOError:
                filler.close()
                break
            fillers.append(filler)
        yield listener
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def waiting_for_room(thread: threading.Thread, tid: int) -> bool:
    """Whether ``thread`` (native id ``tid``) sleeps in a connect for room in a listen
    queue, as opposed to having finished; waits until it does one or the other."""
    while thread.is_alive():
        with contextlib.suppress(FileNotFoundError), open(f"/proc/self/task/{tid}/wchan") as f:
            if f.read().strip() == "unix_wait_for_peer":
                return True
        time.sleep(0.01)
    return False
