"""mcpd's side of a server's host loopback grant: each connection the server makes to
a listener in its namespace (``netns``) is spliced to the same port on the host's
loopback, and nowhere else: the server picks neither the address nor the port, and
learns nothing but the bytes that port's listener sends. A relayed connection ends as a
whole when either side ends its sending (there is no half-close through it).

At most ``MAX_OPEN`` relayed connections are open per server at a time, across its
ports: one over that is closed as soon as it is accepted, so a server that floods its
grant holds a bounded number of mcpd's descriptors and of the host listener's.

The host's side of a relayed connection is mcpd's own socket, held by mcpd's process,
so a listener on the host that asks which process holds it finds mcpd, not the
server. While it is open, ``relayed_by`` names the server it is relayed for, by its
own port and the one it reaches; it is known before the first byte of the server's is
copied to it. (The ports are the kernel's to give out, one connection each at a time,
so the record is one for the whole process, whichever daemon's relay made it.)
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
from collections.abc import Sequence
from typing import Final

import trio

from ...complaints import Complaints

MAX_OPEN: Final = 32
_CHUNK: Final = 65536
# What an accept fails with while mcpd is short of descriptors or memory: the relay,
# and the server's transport with it, goes on once they free up.
_STARVED: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_STARVED_PAUSE: Final = 0.1

logger = logging.getLogger("mcpd.stdio")

# (host port of mcpd's side, port it reaches) -> the server it is relayed for.
_relayed: dict[tuple[int, int], str] = {}


def relayed_by(port: int, to: int) -> str | None:
    """The server whose connection mcpd relays from 127.0.0.1:``port`` to the host's
    port ``to`` (None: none is)."""
    return _relayed.get((port, to))


async def relay_loopback(
    alias: str, listeners: Sequence[tuple[socket.socket, int]], complaints: Complaints
) -> None:
    """Serve the listeners until cancelled; they are closed on the way out. A server
    can connect to a port nobody listens on as fast as it likes: what is logged of
    that is held to its ``complaints``."""
    limiter = trio.CapacityLimiter(MAX_OPEN)
    wrapped = [(trio.SocketListener(trio.socket.from_stdlib_socket(s)), p) for s, p in listeners]
    try:
        async with trio.open_nursery() as nursery:
            for listener, port in wrapped:
                nursery.start_soon(_accept, alias, listener, port, limiter, complaints, nursery)
    finally:
        with trio.CancelScope(shield=True):
            for listener, _ in wrapped:
                await listener.aclose()


async def _accept(
    alias: str,
    listener: trio.SocketListener,
    port: int,
    limiter: trio.CapacityLimiter,
    complaints: Complaints,
    nursery: trio.Nursery,
) -> None:
    refusing = False  # said once per run of refusals: a flood must not flood the log too
    starved = False  # the same for a run of failed accepts
    while True:
        try:
            inside = await listener.accept()
        except OSError as exc:
            if exc.errno not in _STARVED:
                raise
            if not starved:
                logger.warning(
                    "%s: cannot take a connection to host loopback port %d: %s; trying again",
                    alias,
                    port,
                    exc.strerror or exc,
                )
                starved = True
            # Nothing tells when a descriptor or memory frees up: the connection waits in
            # the listener's queue, and is taken after a pause (as trio's serve_listeners).
            await trio.sleep(_STARVED_PAUSE)
            continue
        starved = False
        try:
            limiter.acquire_on_behalf_of_nowait(inside)
        except trio.WouldBlock:
            if not refusing:
                logger.warning(
                    "%s: connections to host loopback port %d are refused while %d are open",
                    alias,
                    port,
                    MAX_OPEN,
                )
                refusing = True
            await inside.aclose()
            continue
        refusing = False
        nursery.start_soon(_splice, alias, inside, port, limiter, complaints)


async def _splice(
    alias: str,
    inside: trio.SocketStream,
    port: int,
    limiter: trio.CapacityLimiter,
    complaints: Complaints,
) -> None:
    outside: trio.SocketStream | None = None
    try:
        try:
            outside = await trio.open_tcp_stream("127.0.0.1", port)
        except OSError as exc:
            note = complaints.admit()
            if note is not None:
                why = exc.strerror or exc
                logger.info("%s: host loopback port %d: %s%s", alias, port, why, note)
            return
        mine = (outside.socket.getsockname()[1], port)
        _relayed[mine] = alias
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_copy, inside, outside, nursery.cancel_scope)
                nursery.start_soon(_copy, outside, inside, nursery.cancel_scope)
        finally:
            del _relayed[mine]
    finally:
        # Released before either side hears the end, so that the next connection the
        # server makes after seeing this one end is not refused for it.
        limiter.release_on_behalf_of(inside)
        with trio.CancelScope(shield=True):
            await inside.aclose()
            if outside is not None:
                await outside.aclose()


async def _copy(
    source: trio.SocketStream, sink: trio.SocketStream, splice: trio.CancelScope
) -> None:
    """One direction; its end (or a failure) ends both: a side that closed is not kept
    waiting on the other, which would hold a relayed connection open for nothing."""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while data := await source.receive_some(_CHUNK):
            await sink.send_all(data)
    splice.cancel()
