"""Restart policy for one supervised server: backoff with jitter, crash-loop detection.

Pure: the caller passes ``now`` (monotonic seconds) and sleeps for the delay it is given.
The random source is injectable so tests can seed it.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Literal, TypeAlias

import msgspec

Jitter: TypeAlias = Literal["full", "decorrelated", "none"]
RestartState: TypeAlias = Literal["idle", "running", "backoff", "crash_loop"]


class BackoffConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    base: float = 0.5
    cap: float = 60.0
    factor: float = 2.0
    # full: uniform(0, base*factor**n); decorrelated: uniform(base, 3*previous); none: no jitter.
    jitter: Jitter = "full"
    max_restarts: int = 5
    window: float = 60.0
    stable_after: float = 30.0

    def __post_init__(self) -> None:
        if self.base <= 0:
            raise ValueError("base must be positive")
        if self.cap < self.base:
            raise ValueError("cap must not be below base")
        if self.factor < 1:
            raise ValueError("factor must be at least 1")
        if self.max_restarts < 1:
            raise ValueError("max_restarts must be at least 1")
        if self.window <= 0:
            raise ValueError("window must be positive")
        if self.stable_after < 0:
            raise ValueError("stable_after must not be negative")


class Restart(msgspec.Struct, frozen=True):
    """What ``on_failure`` decided: wait ``delay`` seconds, i.e. restart at ``at``."""

    delay: float
    at: float
    # Consecutive failures since the server was last stable, this one included.
    failures: int
    # True only on the failure that entered the crash loop, so it is logged once.
    entered_crash_loop: bool


class RestartPolicy:
    __slots__ = (
        "_ceiling",
        "_deaths",
        "_failures",
        "_in_crash_loop",
        "_loops",
        "_previous",
        "_restarts",
        "_rng",
        "_started_at",
        "_state",
        "config",
    )

    def __init__(
        self,
        config: BackoffConfig | None = None,
        *,
        rng: random.Random | None = None,
        loops: bool = True,
    ) -> None:
        """``loops``: whether failures can be a crash loop, retried only every ``cap``.
        A child process that keeps dying is one; a remote server that cannot be reached
        is not, and a short blip of it must not cost a whole ``cap`` of outage: its
        delays just keep growing to the cap."""
        self.config = config if config is not None else BackoffConfig()
        self._loops = loops
        self._rng = rng if rng is not None else random.Random()
        self._state: RestartState = "idle"
        self._started_at: float | None = None
        self._restarts = 0
        # Only the last max_restarts deaths matter for the crash-loop window.
        self._deaths: deque[float] = deque(maxlen=self.config.max_restarts)
        self._failures = 0
        self._in_crash_loop = False
        self._ceiling = self.config.base
        self._previous = self.config.base

    @property
    def state(self) -> RestartState:
        return self._state

    @property
    def restarts(self) -> int:
        """Restarts scheduled over this policy's lifetime."""
        return self._restarts

    @property
    def failures(self) -> int:
        """Consecutive failures since the server was last stable."""
        return self._failures

    @property
    def in_crash_loop(self) -> bool:
        return self._in_crash_loop

    @property
    def stable_at(self) -> float | None:
        """When the running server will count as stable, for a timer calling ``refresh``."""
        if self._started_at is None:
            return None
        return self._started_at + self.config.stable_after

    def on_start(self, now: float) -> None:
        """The server is up (spawned and answering)."""
        self._state = "running"
        self._started_at = now

    def refresh(self, now: float) -> bool:
        """Forget past failures if the server has been up long enough; True if it did."""
        stable_at = self.stable_at
        if stable_at is None or now < stable_at:
            return False
        if self._failures == 0 and not self._in_crash_loop:
            return False
        self._failures = 0
        self._in_crash_loop = False
        self._deaths.clear()
        self._ceiling = self.config.base
        self._previous = self.config.base
        return True

    def reconfigure(self, config: BackoffConfig) -> None:
        """Take new delays and crash-loop limits, keeping the failures counted: the next
        delay and the next judgement of a crash loop are the new config's. A delay
        already given is kept."""
        self.config = config
        self._deaths = deque(self._deaths, maxlen=config.max_restarts)
        self._ceiling = min(config.cap, max(config.base, self._ceiling))
        self._previous = min(config.cap, max(config.base, self._previous))

    def on_failure(self, now: float) -> Restart:
        """The server died or could not be started; returns when to try again."""
        self.refresh(now)
        self._started_at = None
        self._failures += 1
        self._restarts += 1
        self._deaths.append(now)
        entered = False
        cfg = self.config
        if (
            self._loops
            and not self._in_crash_loop
            and (len(self._deaths) == cfg.max_restarts and now - self._deaths[0] <= cfg.window)
        ):
            self._in_crash_loop = entered = True
        if self._in_crash_loop:
            delay = cfg.cap
            self._state = "crash_loop"
        else:
            delay = self._next_delay()
            self._state = "backoff"
        return Restart(delay, now + delay, self._failures, entered)

    def _next_delay(self) -> float:
        cfg = self.config
        if cfg.jitter == "decorrelated":
            self._previous = min(cfg.cap, self._rng.uniform(cfg.base, self._previous * 3))
            return self._previous
        ceiling = self._ceiling
        # Grown by multiplication, stopping at the cap, so a long outage cannot overflow.
        self._ceiling = min(cfg.cap, ceiling * cfg.factor)
        if cfg.jitter == "full":
            return self._rng.uniform(0.0, ceiling)
        return ceiling
