"""Reading a non-blocking pipe or socket with one pass through trio's loop per chunk.

trio's pipe read yields before it tries the read and then waits for the pipe when it
finds nothing: two passes for each answer of a server that answers one request at a
time. Its socket read tries first and waits only when there is nothing, which costs a
failed system call (and an exception) whenever the peer has not written yet, and a
peer answering one request at a time nearly never has.

``receive`` tries first, as trio's sockets do, unless the caller says the last read
emptied the buffer (it returned less than it asked for): then it waits first. A read
that finds data at once still yields (without losing the data to a cancellation), so
a peer that floods cannot starve the rest.
"""

from __future__ import annotations

import errno
import os

import trio


async def receive(fd: int, max_bytes: int, wait_first: bool = False) -> bytes:
    """Up to ``max_bytes`` from ``fd``; b"" at its end. Raises trio.BrokenResourceError,
    or trio.ClosedResourceError when the fd was closed."""
    if not wait_first:
        try:
            data = os.read(fd, max_bytes)
        except BlockingIOError:
            pass
        except OSError as exc:
            raise _error(exc) from None
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return data
    while True:
        await trio.lowlevel.wait_readable(fd)
        try:
            return os.read(fd, max_bytes)
        except BlockingIOError:
            continue
        except OSError as exc:
            raise _error(exc) from None


def _error(exc: OSError) -> trio.BrokenResourceError | trio.ClosedResourceError:
    if exc.errno == errno.EBADF:
        return trio.ClosedResourceError("the pipe or socket was already closed")
    return trio.BrokenResourceError(str(exc))
