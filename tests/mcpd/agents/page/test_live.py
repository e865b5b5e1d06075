"""The page's live updates: a stream sends the regions that changed; a keep-alive is a
comment that reads nothing of the daemon; what a change makes the page draw is drawn
once for all the streams that read the same, once for each different reader; the
clock's refresh draws again after a quiet minute; a stream ends with its session."""

from __future__ import annotations

import trio
import trio.testing

from mcpd.agents.page.live import KEEPALIVE, REFRESH, Live, Regions
from tests.support.page_stream import KEEP_ALIVE, Stream, requested


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
