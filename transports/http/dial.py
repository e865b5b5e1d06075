"""Opening an HTTP connection to an origin: TCP (with the kernel probing a quiet one
when asked), then TLS for https; why it could not be opened, in the transport's errors."""

from __future__ import annotations

import os
import socket
import ssl

import trio

from protocol.http.parts import Origin

from ..errors import TransportError, Unreachable
from .connection import HttpConnection, io_errors

__all__ = ["connect"]


def _probe_idle(tcp: trio.SocketStream, idle: float) -> None:
    """Have the kernel probe a quiet connection, so a peer that vanished (and a NAT
    that forgot us) ends a long-lived stream that no read timeout watches."""
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    # The socket module names the option only on Linux; elsewhere the defaults apply.
    if hasattr(socket, "TCP_KEEPIDLE"):
        tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, max(1, int(idle)))
        tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, max(1, int(idle / 4)))
        tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 4)


async def connect(
    origin: Origin,
    label: str,
    *,
    ssl_context: ssl.SSLContext | None,
    connect_timeout: float,
    read_timeout: float | None,
    tcp_keepalive: float | None = None,
) -> HttpConnection:
    stream: trio.abc.Stream
    with trio.move_on_after(connect_timeout) as scope:
        try:
            tcp = await trio.open_tcp_stream(origin.host, origin.port)
        except OSError as exc:
            raise Unreachable(f"{label}: cannot connect to {origin}: {_why(exc)}") from None
        if tcp_keepalive is not None:
            _probe_idle(tcp, tcp_keepalive)
        stream = tcp
        if ssl_context is not None:
            tls = trio.SSLStream(
                tcp, ssl_context, server_hostname=origin.host, https_compatible=True
            )
            try:
                with io_errors(label, "setting up TLS", TransportError):
                    await tls.do_handshake()
            except BaseException:
                await trio.aclose_forcefully(tcp)
                raise
            stream = tls
        return HttpConnection(stream, label, read_timeout)
    assert scope.cancelled_caught
    raise Unreachable(f"{label}: connecting to {origin} timed out after {connect_timeout:g} s")


def _why(exc: OSError) -> str:
    """What went wrong connecting: trio sums up one failure per address tried as "all
    attempts failed"; the errors of those attempts ("Connection refused") say more."""
    group = exc.__cause__
    if isinstance(group, BaseExceptionGroup):
        reasons = {
            os.strerror(e.errno) if e.errno else str(e)
            for e in group.exceptions
            if isinstance(e, OSError)
        }
        if reasons:
            return ", ".join(sorted(reasons))
    return exc.strerror or str(exc)
