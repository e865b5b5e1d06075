"""The page's live updates, ``GET /page/events``: an event stream of the regions of the
page (``render.regions``) that changed since the stream last sent them.

A stream draws the page again when what it shows may have changed: when the daemon
says so (``changed``: a server, a list, an approval, a call recorded), once a burst of
such news has passed (``DEBOUNCE``); and when the clock has moved on to the next
``REFRESH``, for the page's times and charts. In between it sends a comment now and
then (``KEEPALIVE``), which draws nothing. The page drawn for a change is drawn once
for all the streams that read the same (``R``: the same profile, filter and session),
so that open pages cost the daemon one drawing a change, not one each.

Open streams are bounded by who reads them (``holder``), asked again each time a new
one opens: a session found since to be an agent's counts as its agent's from then on.
Those of sessions that may decide are ``MAX_STREAMS`` at most, a new one ending the
oldest of them; every other (a reader on the socket without a session, one with the
token, a session opened from an agent's side) never ends one of those: they are
``MAX_STREAMS`` more at most, and ``PER_HOLDER`` of the same holder, a new one ending
that holder's oldest first. So a peer that opens streams without end ends its own,
never a person's live page.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Final, Generic, TypeVar

import msgspec
import trio

from ..http.wire import Reject, Wire, WireResponse, end_when_set
from .assets import STREAM_HEADERS

R = TypeVar("R", bound=Hashable)
Regions = dict[str, str]  # by the id of the element each fills, as ``render.regions``

_encode: Final = msgspec.json.Encoder().encode
MAX_STREAMS: Final = 8
PER_HOLDER: Final = 2  # of the streams of readers that decide nothing
KEEPALIVE: Final = 15.0
REFRESH: Final = 60.0
WRITE_TIMEOUT: Final = 30.0
DEBOUNCE: Final = 0.1


class Live(Generic[R]):
    def __init__(self, draw: Callable[[R], Regions]) -> None:
        """``draw``: the page's regions as a reader sees them now."""
        self._draw = draw
        self._news = trio.Event()
        self._changes = 0
        # Each open stream's holder as it is now (None: a session that may decide),
        # oldest first.
        self._streams: dict[trio.CancelScope, Callable[[], Hashable | None]] = {}
        # What was drawn since the latest change and refresh, by what was read.
        self._drawn: dict[R, Regions] = {}
        self._drawn_as_of = (-1, -1)

    def changed(self) -> None:
        self._changes += 1
        self._news.set()
        self._news = trio.Event()

    async def stream(
        self,
        wire: Wire,
        reading: Callable[[], R],
        alive: Callable[[], bool],
        holder: Callable[[], Hashable | None] = lambda: None,
        ends: trio.Event | None = None,
    ) -> None:
        """Serve one stream until its reader goes, ``reading`` raises ``Reject`` (it
        may read no more of what it asked for), ``alive`` says its session ended, a
        newer stream of its kind ends it, or ``ends`` is set (its connection is to
        close). ``holder``: who the stream is counted with now (a peer, an agent), None
        for a session that may decide."""
        for oldest in self._pushed_out(holder()):
            del self._streams[oldest]
            oldest.cancel()
        response = WireResponse(wire, headers=STREAM_HEADERS)
        cancel = trio.CancelScope()
        self._streams[cancel] = holder
        try:
            with cancel:
                with trio.move_on_after(WRITE_TIMEOUT):
                    await response.open_stream()
                async with trio.open_nursery() as nursery:

                    async def end_on_hangup() -> None:
                        await wire.wait_gone()
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(end_on_hangup)
                    if ends is not None:
                        nursery.start_soon(end_when_set, ends, nursery.cancel_scope)
                    await self._pump(response, reading, alive)
                    nursery.cancel_scope.cancel()
        except (trio.TooSlowError, Reject):
            pass  # a reader that stopped reading, or a profile it may no longer read
        finally:
            self._streams.pop(cancel, None)
            if not wire.broken:
                with trio.move_on_after(1, shield=True):
                    await response.finish(None, 200)

    def _pushed_out(self, holder: Hashable | None) -> list[trio.CancelScope]:
        """The streams a new one of ``holder`` ends: the oldest of its kind past the
        bound, and never one of a session that may decide for one that is not."""
        streams = [(s, now()) for s, now in self._streams.items()]
        if holder is None:
            alike = [s for s, h in streams if h is None]
        else:
            own = [s for s, h in streams if h == holder]
            if len(own) >= PER_HOLDER:
                return own[: len(own) - PER_HOLDER + 1]
            alike = [s for s, h in streams if h is not None]
        return alike[: max(0, len(alike) - MAX_STREAMS + 1)]

    async def _pump(
        self, response: WireResponse, reading: Callable[[], R], alive: Callable[[], bool]
    ) -> None:
        sent: Regions = {}
        while not response.wire.broken:
            news = self._news  # taken first: a change while drawing is not missed
            refresh = self._refresh()
            parts = self._drawing(reading())
            changed = {k: v for k, v in parts.items() if sent.get(k) != v}
            if changed:
                with trio.fail_after(WRITE_TIMEOUT):
                    await response.event(_encode(changed))
            sent = parts
            if not await self._until_news(response, news, refresh, alive):
                return

    async def _until_news(
        self, response: WireResponse, news: trio.Event, refresh: int, alive: Callable[[], bool]
    ) -> bool:
        """Wait for something to draw, keeping the stream alive meanwhile; False: the
        session ended."""
        while True:
            with trio.move_on_after(KEEPALIVE) as idle:
                await news.wait()
            if not idle.cancelled_caught:
                await trio.sleep(DEBOUNCE)
                return True
            if not alive():
                return False  # its time, or a new token
            if self._refresh() != refresh:
                return True
            with trio.fail_after(WRITE_TIMEOUT):
                await response.comment(b"keep-alive")

    def _drawing(self, reading: R) -> Regions:
        """The page as ``reading`` sees it, drawn once a change and refresh."""
        as_of = (self._changes, self._refresh())
        if as_of != self._drawn_as_of:
            self._drawn = {}
            self._drawn_as_of = as_of
        parts = self._drawn.get(reading)
        if parts is None:
            parts = self._drawn[reading] = self._draw(reading)
        return parts

    @staticmethod
    def _refresh() -> int:
        return int(trio.current_time() // REFRESH)
