"""What each server went through lately, for the status page: its state changes of the
last day (with why and when) and its calls minute by minute over the last hour.

Both are rings of fixed size per server. The state changes are noted as mcpd hears of
them (the wiring calls ``note`` on every change a server publishes); the minutes are
cut once a minute from each runner's latency ring (``roll``), so a call costs nothing
more than it did. Histories are kept by alias, apart from the servers, so a reload
that restarts a server keeps its history, and they are saved in the state file and
read back at start-up (``statefile.SavedHistory``).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Final

import msgspec
import trio

from ...local.state.statefile import SavedChange, SavedHistory, SavedMinute
from ..life.server_parts import ServerParts
from .stats import LatencyStats, nearest_rank

CHANGES: Final = 256  # state changes kept per server: a day of a calm one, hours of a flapping one
MINUTES: Final = 60  # minutes with calls kept per server
DAY: Final = 86400.0
HOUR: Final = 3600
# Saved with the state file this often (in minutes) when only the minutes changed.
SAVE_EVERY: Final = 10
NOT_RUNNING: Final = "mcpd was not running"


class ServerHistory(msgspec.Struct, frozen=True):
    """One server's history as the page draws it (times are Unix times)."""

    server: str
    # Oldest first: the change in force a day ago (if known), then every later one.
    changes: list[SavedChange]
    # Oldest first, minutes with calls only, the current minute (so far) last.
    minutes: list[SavedMinute]
    # Whether older changes within the day were let go of (the ring was full).
    clipped: bool = False


class _Track:
    __slots__ = ("_calls", "_errors", "_stats", "changes", "minutes")

    def __init__(self, saved: SavedHistory | None = None) -> None:
        self.changes: deque[SavedChange] = deque(maxlen=CHANGES)
        self.minutes: deque[SavedMinute] = deque(maxlen=MINUTES)
        if saved is not None:
            self.changes.extend(sorted(saved.changes, key=lambda c: c.at)[-CHANGES:])
            self.minutes.extend(sorted(saved.minutes, key=lambda m: m.at)[-MINUTES:])
            last = self.changes[-1] if self.changes else None
            if saved.until and (last is None or last.state != "stopped"):
                # What happened while mcpd was not running is not known.
                self.changes.append(SavedChange(saved.until, "stopped", NOT_RUNNING))
        self._stats: LatencyStats | None = None
        self._calls = 0
        self._errors = 0

    def note(self, at: float, state: str, reason: str | None) -> bool:
        last = self.changes[-1] if self.changes else None
        if last is not None and last.state == state:
            return False
        self.changes.append(SavedChange(at, state, reason))
        return True

    def _since_last(self, stats: LatencyStats) -> tuple[int, int, int]:
        """(calls, errors, the call count they start after) since the last roll."""
        if stats is not self._stats:  # a new server: its counts start from zero
            return stats.calls, stats.errors, 0
        return stats.calls - self._calls, stats.errors - self._errors, self._calls

    def minute(self, at: int, stats: LatencyStats) -> SavedMinute | None:
        """The calls since the last roll as the minute beginning ``at`` (None: none)."""
        calls, errors, after = self._since_last(stats)
        if calls <= 0:
            return None
        samples = stats.since(after)
        p50, p95 = nearest_rank(samples, 0.5), nearest_rank(samples, 0.95)
        return SavedMinute(at, calls, errors, _ms(p50), _ms(p95))

    def roll(self, at: int, stats: LatencyStats) -> bool:
        """Cut the minute beginning ``at``; whether it had calls."""
        done = self.minute(at, stats)
        self._stats, self._calls, self._errors = stats, stats.calls, stats.errors
        if done is not None:
            self.minutes.append(done)
        return done is not None

    def saved(self, until: float) -> SavedHistory:
        return SavedHistory(changes=list(self.changes), minutes=list(self.minutes), until=until)


class Histories:
    def __init__(self, on_saved_news: Callable[[], None] = lambda: None) -> None:
        """``on_saved_news``: the state file has something new to save."""
        self._tracks: dict[str, _Track] = {}
        self._on_saved_news = on_saved_news
        self._until = 0.0
        self._rolls = 0
        self._unsaved = False  # minutes with calls that the state file has not had

    def load(self, saved: Mapping[str, SavedHistory], aliases: Iterable[str]) -> None:
        """The histories the state file had, of the servers configured now."""
        for alias in aliases:
            if alias in saved:
                self._tracks[alias] = _Track(saved[alias])

    def note(self, alias: str, server: ServerParts, at: float | None = None) -> None:
        """The server ``alias`` may have changed state: a new state is recorded."""
        state = server.state
        reason = None if server.available else server.outage().reason
        track = self._tracks.get(alias)
        if track is None:
            track = self._tracks[alias] = _Track()
        at = time.time() if at is None else at
        if track.note(at, state, reason):
            self._until = max(self._until, at)

    def forget(self, alias: str) -> None:
        """The server left the configuration: its history goes with it."""
        self._tracks.pop(alias, None)

    def roll(self, at: int, servers: Mapping[str, ServerParts]) -> None:
        """The minute that began at ``at`` is over: cut it from each runner's calls."""
        for alias, server in servers.items():
            track = self._tracks.get(alias)
            if track is None:
                track = self._tracks[alias] = _Track()
            self._unsaved |= track.roll(at, server.stats)
        self._until = max(self._until, at + 60.0)
        self._rolls += 1
        if self._rolls % SAVE_EVERY == 0 and self._unsaved:
            self._unsaved = False
            self._on_saved_news()

    def saved(self) -> dict[str, SavedHistory]:
        return {alias: t.saved(self._until) for alias, t in sorted(self._tracks.items())}

    def view(
        self,
        servers: Mapping[str, ServerParts],
        only: Callable[[str], bool] | None = None,
        now: float | None = None,
    ) -> list[ServerHistory]:
        """The history of each running server (whose alias ``only`` admits) as of ``now``."""
        now = time.time() if now is None else now
        out = []
        for alias in sorted(servers):
            if only is not None and not only(alias):
                continue
            track = self._tracks.get(alias) or _Track()
            out.append(_view(alias, track, servers[alias].stats, now))
        return out

    async def run(
        self,
        servers: Callable[[], Mapping[str, ServerParts]],
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Cut a minute from every server's calls as each wall-clock minute ends."""
        task_status.started()
        while True:
            now = time.time()
            ends = (math.floor(now / 60) + 1) * 60
            await trio.sleep(ends - now)
            self.roll(ends - 60, servers())


def _view(alias: str, track: _Track, stats: LatencyStats, now: float) -> ServerHistory:
    day_ago = now - DAY
    changes = list(track.changes)
    first = 0
    while first + 1 < len(changes) and changes[first + 1].at <= day_ago:
        first += 1  # the one in force a day ago stays, the ones before it go
    clipped = len(changes) == CHANGES and changes[0].at > day_ago
    hour_ago = now - HOUR
    minutes = [m for m in track.minutes if m.at > hour_ago]
    current = track.minute(int(now // 60) * 60, stats)
    if current is not None:
        minutes.append(current)
    return ServerHistory(alias, changes[first:], minutes, clipped)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)
