"""The relay of a server's host loopback grant, on plain sockets: a listener standing
for the one in the server's namespace, spliced to a host listener's port; what flows,
how a relayed connection ends, and how a flood of connections is capped."""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import pytest
import trio
import trio.testing

from transports.complaints import BURST, Complaints
from transports.stdio.loopback.relay import MAX_OPEN, relay_loopback

LIMIT = 10


class Host:
    """A listener on the host's loopback that greets each connection, echoes what it
    gets, and counts the connections it accepted and those whose other side ended."""

    def __init__(self, listener: trio.SocketListener) -> None:
        self.listener = listener
        self.port: int = listener.socket.getsockname()[1]
        self.accepted = 0
        self.ended = 0
        self.changed = trio.Event()

    def _changed(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def serve(self, stream: trio.SocketStream) -> None:
        async with stream:
            self.accepted += 1
            self._changed()
            try:
                await stream.send_all(b"hello ")
                while data := await stream.receive_some(1024):
                    await stream.send_all(data)
            except trio.BrokenResourceError:
                pass
            self.ended += 1
            self._changed()

    async def wait(self, *, accepted: int = 0, ended: int = 0) -> None:
        while self.accepted < accepted or self.ended < ended:
            await self.changed.wait()


def inside_listener() -> socket.socket:
    """The listener the relay serves (in the server's namespace, in the product)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@contextmanager
def closed_port() -> Iterator[int]:
    """A port nobody listens on for as long as it is held: bound and never listening,
    it refuses every connection, and no other process on the machine can take it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@asynccontextmanager
async def relaying(ports: list[int]) -> AsyncIterator[list[int]]:
    """The relay serving one inside listener per port; the inside listeners' ports."""
    socks = [inside_listener() for _ in ports]
    inside = [s.getsockname()[1] for s in socks]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            relay_loopback, "srv", list(zip(socks, ports, strict=True)), Complaints()
        )
        yield inside
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def hosts(count: int) -> AsyncIterator[list[Host]]:
    async with trio.open_nursery() as nursery:
        found = []
        for _ in range(count):
            host = Host((await trio.open_tcp_listeners(0, host="127.0.0.1"))[0])
            nursery.start_soon(trio.serve_listeners, host.serve, [host.listener])
            found.append(host)
        yield found
        nursery.cancel_scope.cancel()


async def receive_exactly(stream: trio.SocketStream, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = await stream.receive_some(size - len(data))
        assert chunk, f"ended after {data!r}"
        data += chunk
    return data


async def test_each_listener_reaches_its_own_port_both_ways() -> None:
    with trio.fail_after(LIMIT):
        async with hosts(2) as (a, b), relaying([a.port, b.port]) as (to_a, to_b):
            for port in (to_a, to_b, to_a):
                async with await trio.open_tcp_stream("127.0.0.1", port) as conn:
                    await conn.send_all(b"x" * 200_000)
                    assert await receive_exactly(conn, 6 + 200_000) == b"hello " + b"x" * 200_000
    assert (a.accepted, b.accepted) == (2, 1)


async def test_the_server_ending_its_sending_ends_the_whole_connection() -> None:
    with trio.fail_after(LIMIT):
        async with hosts(1) as (host,), relaying([host.port]) as (port,):
            conn = await trio.open_tcp_stream("127.0.0.1", port)
            assert await receive_exactly(conn, 6) == b"hello "
            await conn.send_eof()
            await host.wait(ended=1)
            # No half-close through the relay: the server's side is ended too.
            assert await conn.receive_some(1024) == b""
            await conn.aclose()


async def test_the_host_listener_ending_ends_the_servers_connection() -> None:
    async def brief(stream: trio.SocketStream) -> None:
        async with stream:
            await stream.send_all(b"bye")

    with trio.fail_after(LIMIT):
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        target = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, brief, listeners)
            async with (
                relaying([target]) as (port,),
                await trio.open_tcp_stream("127.0.0.1", port) as conn,
            ):
                assert await receive_exactly(conn, 3) == b"bye"
                assert await conn.receive_some(1024) == b""
            nursery.cancel_scope.cancel()


async def test_a_port_nobody_listens_on_closes_the_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        closed_port() as nobody,
        trio.fail_after(LIMIT),
        caplog.at_level(logging.INFO, "mcpd.stdio"),
    ):
        async with relaying([nobody]) as (port,):
            for _ in range(2):
                async with await trio.open_tcp_stream("127.0.0.1", port) as conn:
                    assert await conn.receive_some(1024) == b""
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2
    assert all(m.startswith(f"srv: host loopback port {nobody}: ") for m in said)


async def test_connections_to_a_closed_port_are_logged_within_the_servers_budget(
    caplog: pytest.LogCaptureFixture, mock_clock: trio.testing.MockClock
) -> None:
    # The clock stands still: a server connecting in a loop gets a burst of lines.
    with closed_port() as nobody, caplog.at_level(logging.INFO, "mcpd.stdio"):
        async with relaying([nobody]) as (port,):
            for _ in range(BURST + 10):
                async with await trio.open_tcp_stream("127.0.0.1", port) as conn:
                    assert await conn.receive_some(1024) == b""
            said = [r.getMessage() for r in caplog.records]
            mock_clock.jump(1.0)
            async with await trio.open_tcp_stream("127.0.0.1", port) as conn:
                assert await conn.receive_some(1024) == b""
    assert len(said) == BURST
    [after] = [r.getMessage() for r in caplog.records][BURST:]
    assert after.endswith("(10 more like this not logged)")


async def test_a_flood_is_capped_and_a_slot_freed_is_taken_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with trio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "mcpd.stdio"):
        async with hosts(2) as (a, b), relaying([a.port, b.port]) as (to_a, to_b):
            held = []
            # The cap is across the server's ports.
            for n in range(MAX_OPEN):
                held.append(await trio.open_tcp_stream("127.0.0.1", to_a if n % 2 else to_b))
            for conn in held:
                assert await receive_exactly(conn, 6) == b"hello "
            # Those over the cap are closed at once, on either port.
            for port in (to_a, to_b, to_a, to_b):
                async with await trio.open_tcp_stream("127.0.0.1", port) as extra:
                    assert await extra.receive_some(1024) == b""
            assert a.accepted + b.accepted == MAX_OPEN
            # One ends: the next connection after it is relayed.
            await held.pop().aclose()
            await a.wait(ended=1)
            async with await trio.open_tcp_stream("127.0.0.1", to_b) as again:
                assert await receive_exactly(again, 6) == b"hello "
            for conn in held:
                await conn.aclose()
    refusals = [r for r in caplog.records if "are refused while" in r.getMessage()]
    # Said once per port for the run of refusals, not once per connection.
    assert sorted(r.getMessage() for r in refusals) == sorted(
        f"srv: connections to host loopback port {p} are refused while {MAX_OPEN} are open"
        for p in (a.port, b.port)
    )


async def test_cancelling_the_relay_closes_its_listeners_and_connections() -> None:
    with trio.fail_after(LIMIT):
        async with hosts(1) as (host,):
            sock = inside_listener()
            port = sock.getsockname()[1]
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(relay_loopback, "srv", [(sock, host.port)], Complaints())
                    conn = await trio.open_tcp_stream("127.0.0.1", port)
                    assert await receive_exactly(conn, 6) == b"hello "
                    scope.cancel()
            assert sock.fileno() == -1
            await host.wait(ended=1)
            assert await conn.receive_some(1024) == b""
            await conn.aclose()
            with pytest.raises(OSError):
                await trio.open_tcp_stream("127.0.0.1", port)


async def test_accepting_without_descriptors_to_spare_waits_and_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """mcpd out of descriptors fails an accept: the connection stays queued and is
    taken once they free up; the relay (and the server's transport) goes on."""
    accept = trio.SocketListener.accept
    failures = [errno.EMFILE, errno.EMFILE, errno.ENFILE]
    inside: list[int] = []

    async def starved(self: trio.SocketListener) -> trio.SocketStream:
        if self.socket.getsockname()[1] in inside and failures:
            await trio.lowlevel.checkpoint()
            raise OSError(failures.pop(0), "Too many open files")
        return await accept(self)

    monkeypatch.setattr(trio.SocketListener, "accept", starved)
    with trio.fail_after(LIMIT):
        async with hosts(1) as (a,), relaying([a.port]) as (to_a,):
            inside.append(to_a)
            conn = await trio.open_tcp_stream("127.0.0.1", to_a)
            async with conn:
                await conn.send_all(b"x")
                assert await receive_exactly(conn, 7) == b"hello x"
    assert failures == []
    said = [r.getMessage() for r in caplog.records if "cannot take a connection" in r.getMessage()]
    assert len(said) == 1, said  # once for the run, not once per failure
