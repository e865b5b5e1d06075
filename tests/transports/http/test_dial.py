"""Opening an HTTP connection to an origin (``connect``) against listeners in this
process: plain TCP and TLS, the kernel told to probe a quiet connection, and why one
could not be opened (refused, a TLS peer that is none, a handshake that never ends),
in the transport's errors."""

from __future__ import annotations

import functools
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing
import trustme

from protocol.http.parts import Origin
from transports.errors import TransportError, Unreachable
from transports.http.dial import connect

LIMIT = 10


@asynccontextmanager
async def listening(
    handle: Callable[[trio.SocketStream], Awaitable[None]],
) -> AsyncIterator[int]:
    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, host="127.0.0.1")
        listeners = await nursery.start(serve, handle, 0)
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


async def silent(stream: trio.SocketStream) -> None:
    async with stream:
        await trio.sleep_forever()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_plain_http_opens_a_connection_knowing_its_peer() -> None:
    with trio.fail_after(LIMIT):
        async with listening(silent) as port:
            conn = await connect(
                Origin("http", "127.0.0.1", port),
                "srv",
                ssl_context=None,
                connect_timeout=5,
                read_timeout=None,
            )
            assert conn.peer == "127.0.0.1"
            await conn.aclose()


async def test_a_quiet_connection_is_probed_by_the_kernel_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened: list[trio.SocketStream] = []
    real = trio.open_tcp_stream

    async def keep(host: str, port: int) -> trio.SocketStream:
        stream = await real(host, port)
        opened.append(stream)
        return stream

    def options(sock: trio.socket.SocketType) -> tuple[int, int, int, int]:
        return (
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
        )

    monkeypatch.setattr(trio, "open_tcp_stream", keep)
    seen: list[tuple[int, int, int, int]] = []
    with trio.fail_after(LIMIT):
        async with listening(silent) as port:
            origin = Origin("http", "127.0.0.1", port)
            for keepalive in (None, 40.0, 0.5):
                conn = await connect(
                    origin,
                    "srv",
                    ssl_context=None,
                    connect_timeout=5,
                    read_timeout=None,
                    tcp_keepalive=keepalive,
                )
                seen.append(options(opened[-1].socket))
                await conn.aclose()
    off, probed, brief = seen
    assert off[0] == 0
    assert probed == (1, 40, 10, 4)
    # Under a second: the kernel's least.
    assert brief == (1, 1, 1, 4)


async def test_a_refused_connection_says_why_not_that_all_attempts_failed() -> None:
    port = free_port()
    with trio.fail_after(LIMIT), pytest.raises(Unreachable) as info:
        await connect(
            Origin("http", "127.0.0.1", port),
            "srv",
            ssl_context=None,
            connect_timeout=5,
            read_timeout=None,
        )
    assert str(info.value) == (
        f"srv: cannot connect to http://127.0.0.1:{port}: Connection refused"
    )


async def test_tls_to_a_peer_that_speaks_no_tls_fails_naming_tls() -> None:
    async def plain(stream: trio.SocketStream) -> None:
        async with stream:
            await stream.send_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
            await trio.sleep_forever()

    with trio.fail_after(LIMIT):
        async with listening(plain) as port:
            with pytest.raises(TransportError) as info:
                await connect(
                    Origin("https", "127.0.0.1", port),
                    "srv",
                    ssl_context=ssl.create_default_context(),
                    connect_timeout=5,
                    read_timeout=None,
                )
    assert str(info.value).startswith("srv: TLS failure while setting up TLS: ")


async def test_a_handshake_that_never_ends_times_out_as_unreachable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with listening(silent) as port:
        start = trio.current_time()
        with pytest.raises(Unreachable) as info:
            await connect(
                Origin("https", "127.0.0.1", port),
                "srv",
                ssl_context=ssl.create_default_context(),
                connect_timeout=2.5,
                read_timeout=None,
            )
        waited = trio.current_time() - start
    assert str(info.value) == f"srv: connecting to https://127.0.0.1:{port} timed out after 2.5 s"
    assert waited == pytest.approx(2.5)


async def test_tls_with_a_trusted_certificate_connects() -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    handshaken = trio.Event()

    async def tls(stream: trio.SocketStream) -> None:
        wrapped = trio.SSLStream(stream, server_ctx, server_side=True)
        async with wrapped:
            await wrapped.do_handshake()
            handshaken.set()
            await trio.sleep_forever()

    with trio.fail_after(LIMIT):
        async with listening(tls) as port:
            conn = await connect(
                Origin("https", "127.0.0.1", port),
                "srv",
                ssl_context=client_ctx,
                connect_timeout=5,
                read_timeout=None,
            )
            await handshaken.wait()
            assert conn.peer == "127.0.0.1"
            await conn.aclose()


async def test_a_certificate_not_trusted_fails_naming_tls() -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)

    async def tls(stream: trio.SocketStream) -> None:
        wrapped = trio.SSLStream(stream, server_ctx, server_side=True)
        async with wrapped:
            try:
                await wrapped.do_handshake()
            except trio.BrokenResourceError:
                return

    with trio.fail_after(LIMIT):
        async with listening(tls) as port:
            with pytest.raises(TransportError) as info:
                await connect(
                    Origin("https", "127.0.0.1", port),
                    "srv",
                    ssl_context=ssl.create_default_context(),
                    connect_timeout=5,
                    read_timeout=None,
                )
    assert "TLS failure while setting up TLS" in str(info.value)
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
