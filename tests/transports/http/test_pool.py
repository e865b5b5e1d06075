"""The pool of keep-alive connections a transport holds to its origin, used directly:
which connections go back to it, which are dropped, how its bound holds when the
server closes connections at any moment, and what closing it does."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from protocol.http.parts import Origin
from tests.support.http_servers.serving import HttpServer, Responder, SeenRequest, serve_http
from transports.errors import TransportClosed, TransportError, Unreachable
from transports.http.connection import HttpConnection
from transports.http.pool import ConnectionPool

LIMIT = 10


def pool_of(srv: HttpServer, *, size: int = 2, keepalive_expiry: float = 60.0) -> ConnectionPool:
    return ConnectionPool(
        Origin("http", srv.host, srv.port),
        "p",
        size=size,
        ssl_context=None,
        connect_timeout=5.0,
        read_timeout=5.0,
        keepalive_expiry=keepalive_expiry,
    )


async def exchange(conn: HttpConnection, target: str = "/") -> bytes:
    """One whole GET on ``conn``: the body of its answer."""
    await conn.send(b"GET", target.encode(), [(b"Host", b"x")], b"")
    head = await conn.receive_head()
    return await conn.read_body(head, 1 << 20)


async def answer_connection(req: SeenRequest, respond: Responder) -> None:
    await respond.reply(200, str(req.connection))


async def test_a_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="pool_size must be at least 1"):
        ConnectionPool(
            Origin("http", "127.0.0.1", 1),
            "p",
            size=0,
            ssl_context=None,
            connect_timeout=1.0,
            read_timeout=1.0,
        )


async def test_a_finished_exchange_gives_its_connection_back_for_the_next() -> None:
    with trio.fail_after(LIMIT):
        async with serve_http(answer_connection) as srv:
            pool = pool_of(srv)
            for _ in range(3):
                async with pool.connection() as conn:
                    assert await exchange(conn) == b"0"
            await pool.aclose()
    assert srv.connections == 1


async def test_idle_connections_are_reused_newest_first() -> None:
    with trio.fail_after(LIMIT):
        async with serve_http(answer_connection) as srv:
            pool = pool_of(srv)
            first, second = await pool.acquire(), await pool.acquire()
            assert [await exchange(first), await exchange(second)] == [b"0", b"1"]
            await pool.release(first)
            await pool.release(second)
            async with pool.connection() as conn:
                assert await exchange(conn) == b"1"
            await pool.aclose()


async def test_a_connection_left_mid_answer_is_closed_not_reused() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(200, "x" * 100_000)

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            pool = pool_of(srv)
            async with pool.connection() as conn:
                await conn.send(b"GET", b"/", [(b"Host", b"x")], b"")
                await conn.receive_head()
                # The caller stops reading: the rest of the body would be read as the
                # next answer if the connection went back.
            async with pool.connection() as conn:
                assert await exchange(conn) == b"x" * 100_000
            await pool.aclose()
    assert srv.connections == 2


async def test_connection_close_from_the_server_is_not_reused() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(200, "ok", {"Connection": "close"})

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            pool = pool_of(srv)
            for _ in range(2):
                async with pool.connection() as conn:
                    assert await exchange(conn) == b"ok"
            await pool.aclose()
    assert srv.connections == 2


async def test_an_idle_connection_the_server_closed_is_replaced() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(200, str(req.connection))
        await respond.cut()  # keep-alive promised, then the server hangs up anyway

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            pool = pool_of(srv, size=1)
            for n in range(3):
                async with pool.connection() as conn:
                    assert await exchange(conn) == str(n).encode()
                # The server's hang-up has reached the idle connection.
                await trio.testing.wait_all_tasks_blocked()
            await pool.aclose()
    assert srv.connections == 3


async def test_idle_connections_past_their_expiry_are_dropped() -> None:
    with trio.fail_after(LIMIT):
        async with serve_http(answer_connection) as srv:
            pool = pool_of(srv, keepalive_expiry=0)
            for n in range(2):
                async with pool.connection() as conn:
                    assert await exchange(conn) == str(n).encode()
            await pool.aclose()
    assert srv.connections == 2


async def test_callers_beyond_the_size_wait_for_a_connection_back() -> None:
    with trio.fail_after(LIMIT):
        async with serve_http(answer_connection) as srv:
            pool = pool_of(srv, size=1)
            held = await pool.acquire()
            got: list[HttpConnection] = []

            async def waiter() -> None:
                got.append(await pool.acquire())

            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiter)
                await trio.testing.wait_all_tasks_blocked()
                assert got == []
                assert await exchange(held) == b"0"
                await pool.release(held)
            assert got == [held]
            await pool.release(got[0])
            await pool.aclose()
    assert srv.connections == 1


@pytest.mark.parametrize("when", ["before the head", "mid-body", "after the answer"])
async def test_a_server_closing_at_any_moment_costs_no_slot(when: str) -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        if when == "before the head":
            await respond.cut()
        await respond.start(200, [("Content-Length", "10")])
        await respond.send(b"12345")
        if when == "mid-body":
            await respond.cut()
        await respond.send(b"67890")
        await respond.end()
        await respond.cut()

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            pool = pool_of(srv, size=1)
            # Each failure must give its slot back, or the second would wait forever.
            for _ in range(3):
                try:
                    async with pool.connection() as conn:
                        assert await exchange(conn) == b"1234567890"
                except TransportError as exc:
                    assert when != "after the answer", exc.reason
                await trio.testing.wait_all_tasks_blocked()
            await pool.aclose()
    assert srv.connections == 3


async def test_a_failed_connect_gives_its_slot_back() -> None:
    # A port nobody listens on: bound and never listening, held so no other process
    # on the machine takes it meanwhile.
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        pool = ConnectionPool(
            Origin("http", "127.0.0.1", sock.getsockname()[1]),
            "p",
            size=1,
            ssl_context=None,
            connect_timeout=5.0,
            read_timeout=5.0,
        )
        with trio.fail_after(LIMIT):
            for _ in range(2):
                with pytest.raises(Unreachable):
                    await pool.acquire()


async def test_a_caller_cancelled_in_line_takes_no_slot() -> None:
    with trio.fail_after(LIMIT):
        async with serve_http(answer_connection) as srv:
            pool = pool_of(srv, size=1)
            held = await pool.acquire()
            with trio.move_on_after(0):
                await pool.acquire()
            await exchange(held)
            await pool.release(held)
            async with pool.connection() as conn:
                assert conn is held
            await pool.aclose()


async def test_closing_drops_idle_connections_and_refuses_new_ones() -> None:
    gone = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(200, "ok")
        await respond.wait_disconnect()
        gone.set()

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            pool = pool_of(srv, size=1)
            async with pool.connection() as conn:
                await exchange(conn)
            await pool.aclose()
            # The server sees the idle connection go.
            await gone.wait()
            with pytest.raises(TransportClosed, match="p: transport closed"):
                await pool.acquire()
            # The refusal gave its slot back: closing again, or another try, does not hang.
            await pool.aclose()
            with pytest.raises(TransportClosed):
                await pool.acquire()


async def test_a_connection_given_back_after_closing_is_closed() -> None:
    gone = trio.Event()

    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(200, "ok")
        await respond.wait_disconnect()
        gone.set()

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            pool = pool_of(srv, size=1)
            conn = await pool.acquire()
            await exchange(conn)
            await pool.aclose()
            await pool.release(conn)
            await gone.wait()


async def test_a_connection_with_bytes_past_its_answer_is_closed_not_reused() -> None:
    # A response sent before its request: reused, the connection would hand it to the
    # next exchange as that one's answer.
    early = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.target == "/first":
            await respond.reply_and_more(200, b"first", early)
        else:
            await respond.reply(200, "second")

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            pool = pool_of(srv, size=1)
            async with pool.connection() as conn:
                assert await exchange(conn, "/first") == b"first"
            async with pool.connection() as conn:
                assert await exchange(conn, "/second") == b"second"
            await pool.aclose()
    assert srv.connections == 2
