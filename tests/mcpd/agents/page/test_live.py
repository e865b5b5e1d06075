"""The page's live updates: a stream sends the regions that changed; a keep-alive is a
comment that reads nothing of the daemon; what a change makes the page draw is drawn
once for all the streams that read the same, once for each different reader; the
clock's refresh draws again after a quiet minute; a stream ends with its session; the
streams of readers that decide nothing (a peer on the socket, through a running daemon
too) end each other, a peer's own first, never a person's that may decide; nor do those
of a session an agent's process opened before it connected, which it holds as an agent's
from then on, while it is connected and after it is gone."""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

import trio
import trio.testing

from mcpd.agents.page.live import KEEPALIVE, MAX_STREAMS, PER_HOLDER, REFRESH, Live, Regions
from mcpd.config.loading.load import parse_config
from mcpd.daemon import Daemon
from tests.support.cli.apart import APART
from tests.support.clients import self_approval
from tests.support.clients.agent import running
from tests.support.page.http_session import http, session
from tests.support.page.stream import KEEP_ALIVE, Stream, requested
from tests.support.system.procs import scripted

LIMIT = 60
BURST = str(Path(__file__).resolve().parents[3] / "support" / "clients" / "call_burst.py")


class Page:
    """Draws the page for a reader, counting the drawings; ``version`` is what the
    daemon's state is, as the page would show it."""

    def __init__(self) -> None:
        self.drawn: list[str] = []
        self.version = 1

    def draw(self, reader: str) -> Regions:
        self.drawn.append(reader)
        return {"rows": f"{reader} sees version {self.version}", "footer": "mcpd"}


async def open_stream(
    nursery: trio.Nursery, live: Live[str], reader: str, alive: list[bool] | None = None
) -> Stream:
    """A stream of ``live`` for ``reader``, served in ``nursery``."""
    stream, wire, _ = await requested()
    still = alive if alive is not None else [True]
    nursery.start_soon(live.stream, wire, lambda: reader, lambda: still[0])
    return stream


async def test_a_keep_alive_is_a_comment_that_draws_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    page = Page()
    live = Live(page.draw)
    with trio.fail_after(REFRESH):  # until the clock's refresh: keep-alives only
        async with trio.open_nursery() as nursery:
            stream = await open_stream(nursery, live, "owner")
            assert await stream.regions() == {"rows": "owner sees version 1", "footer": "mcpd"}
            for _ in range(int(REFRESH / KEEPALIVE) - 1):
                assert await stream.next() == KEEP_ALIVE
            assert page.drawn == ["owner"]
            nursery.cancel_scope.cancel()


async def test_a_change_sends_only_the_regions_it_changed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    page = Page()
    live = Live(page.draw)
    async with trio.open_nursery() as nursery:
        stream = await open_stream(nursery, live, "owner")
        await stream.regions()
        page.version = 2
        live.changed()
        assert await stream.regions() == {"rows": "owner sees version 2"}
        nursery.cancel_scope.cancel()


async def test_streams_that_read_the_same_share_each_drawing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    page = Page()
    live = Live(page.draw)
    async with trio.open_nursery() as nursery:
        streams = [await open_stream(nursery, live, "owner") for _ in range(3)]
        other = await open_stream(nursery, live, "profile work")
        for stream in [*streams, other]:
            await stream.regions()
        assert sorted(page.drawn) == ["owner", "profile work"]
        page.version = 2
        for _ in range(5):  # a burst of news, drawn once it has passed
            live.changed()
        for stream in streams:
            assert await stream.regions() == {"rows": "owner sees version 2"}
        assert await other.regions() == {"rows": "profile work sees version 2"}
        assert sorted(page.drawn) == ["owner", "owner", "profile work", "profile work"]
        nursery.cancel_scope.cancel()


async def test_a_quiet_page_is_drawn_again_once_a_refresh(
    autojump_clock: trio.testing.MockClock,
) -> None:
    page = Page()
    live = Live(page.draw)
    async with trio.open_nursery() as nursery:
        stream = await open_stream(nursery, live, "owner")
        await stream.regions()
        page.version = 2  # as the clock moves a chart on, with no news of it
        assert await stream.regions() == {"rows": "owner sees version 2"}
        assert page.drawn == ["owner", "owner"]
        assert trio.current_time() >= REFRESH
        nursery.cancel_scope.cancel()


async def test_a_stream_ends_with_its_session(autojump_clock: trio.testing.MockClock) -> None:
    page = Page()
    live = Live(page.draw)
    alive = [True]
    async with trio.open_nursery() as nursery:
        stream = await open_stream(nursery, live, "owner", alive)
        await stream.regions()
        alive[0] = False
        try:
            while True:
                assert await stream.next() == KEEP_ALIVE
        except EOFError:
            pass
    assert page.drawn == ["owner"]


async def ended(stream: Stream) -> bool:
    """Whether the stream ends before its next event (its first drawing read already)."""
    try:
        while (await stream.next()).startswith(b":"):
            pass
    except EOFError:
        return True
    return False


async def test_streams_of_readers_that_decide_nothing_never_end_a_deciding_ones(
    autojump_clock: trio.testing.MockClock,
) -> None:
    page = Page()
    live = Live(page.draw)
    async with trio.open_nursery() as nursery:
        person = await open_stream(nursery, live, "owner")
        await person.regions()
        peers = []
        for pid in range(MAX_STREAMS + 1):  # a peer of many processes, two streams each
            for _ in range(PER_HOLDER + 1):
                stream, wire, _ = await requested()
                holder = partial(int, pid)
                nursery.start_soon(live.stream, wire, lambda: "peer", lambda: True, holder)
                await stream.regions()
                peers.append(stream)
        page.version = 2
        live.changed()
        assert not await ended(person)
        # Each holder kept its newest two, and the oldest holder was ended whole.
        kept = [not await ended(s) for s in peers]
        assert kept[: PER_HOLDER + 1] == [False] * (PER_HOLDER + 1)
        assert kept.count(True) == MAX_STREAMS
        nursery.cancel_scope.cancel()


# -- through a running daemon --


def config(tmp_path: Path) -> Any:
    command, args = scripted("--names", "read,write")
    return parse_config(
        {
            "daemon": {
                "socket": str(tmp_path / "mcpd.sock"),
                "state_dir": str(tmp_path / "state"),
                "http_listen": "127.0.0.1:0",
                "audit_journal": False,
            },
            "servers": {"files": {"command": command, "args": list(args)}},
            "policy": [{"tools": ["files/write"], "action": "ask"}],
        }
    )


async def events(port: int, cookie: str) -> trio.SocketStream:
    """A person's live page: its stream, once its first drawing came."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    head = f"GET /page/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {cookie}\r\n\r\n"
    await stream.send_all(head.encode())
    got = b""
    while b"data: " not in got:
        got += await stream.receive_some(1 << 16)
    return stream


async def until_approval_or_end(stream: trio.SocketStream) -> bool:
    """Whether the page's stream brings a call waiting for approval (False: it ended)."""
    got = b""
    while b'data-waits=\\"approval\\"' not in got:
        chunk = await stream.receive_some(1 << 16)
        got += chunk
        if not chunk or got.endswith(b"0\r\n\r\n"):
            return False
    return True


async def a_call_is_decided_on(
    pages: list[trio.SocketStream], daemon: Daemon, cookie: str, csrf: str
) -> None:
    """An agent of its own, started apart from the test, makes a call to approve: each of
    the person's live ``pages`` brings it, and the person denies it there."""
    assert daemon.agent_server.endpoint is not None
    port, sock = daemon.agent_server.endpoint.port, daemon.socket_path
    async with trio.open_nursery() as nursery:
        calls = json.dumps([["mcp__files__write", {"text": "page"}]])
        argv = [*APART, sys.executable, BURST, sock, "default", "modern", calls]
        nursery.start_soon(partial(trio.run_process, argv, capture_stdout=True))
        for page in pages:
            assert await until_approval_or_end(page)
        [waiting] = daemon.approvals.list()
        acting = {
            "Cookie": cookie,
            "Origin": f"http://127.0.0.1:{port}",
            "X-Mcpd-Csrf": csrf,
            "Accept": "application/json",
        }
        body = f"id={waiting.id}&decision=deny".encode()
        assert (await http(port, "POST", "/page/decide", acting, body)).status == 200


async def test_a_socket_peers_streams_leave_a_persons_live_page_be(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, sock = daemon.agent_server.endpoint.port, daemon.socket_path
            cookie, csrf = await session(port, sock)
            person = await events(port, cookie)
            # A peer on the socket, which needs no session there, opens streams.
            peers = []
            for _ in range(MAX_STREAMS + 1):
                peer = await trio.open_unix_socket(sock)
                await peer.send_all(b"GET /page/events HTTP/1.1\r\nHost: mcpd\r\n\r\n")
                got = b""
                while b"\r\n\r\n" not in got:
                    got += await peer.receive_some(1 << 16)
                peers.append(peer)
            await a_call_is_decided_on([person], daemon, cookie, csrf)
            for stream in [person, *peers]:
                await stream.aclose()


async def test_what_an_agent_opened_before_it_connected_leaves_a_persons_live_page_be(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, sock = daemon.agent_server.endpoint.port, daemon.socket_path
            cookie, csrf = await session(port, sock)
            person = await events(port, cookie)
            async with self_approval.agent("unconnected", sock, apart=True) as agent:
                # Its process asks for a code and trades it while no agent yet: nothing
                # tells it from a person then, and its streams count with the person's.
                _, traded = await agent.runs("codes", "1", "trade")
                status, early = traded.split("\n")
                assert status == "200"
                theirs = [await events(port, early) for _ in range(MAX_STREAMS - 1)]
                # Then it connects, and stays: the person's next tab ends not their
                # first, and the streams it opens now end neither.
                await agent.runs("connect")
                tab = await events(port, cookie)
                theirs += [await events(port, early) for _ in range(MAX_STREAMS)]
                await a_call_is_decided_on([person, tab], daemon, cookie, csrf)
                for stream in [person, tab, *theirs]:
                    await stream.aclose()
                # Its page says it decides nothing.
                own = await http(port, "GET", "/", {"Cookie": early})
                assert own.status == 200 and b'id="look-only"' in own.body
            # Gone, and its processes too: what it opened stays an agent's.
            own = await http(port, "GET", "/", {"Cookie": early})
            assert own.status == 200 and b'id="look-only"' in own.body
