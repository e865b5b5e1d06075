"""How fast mcpd reads what one server sends, and how much of it it holds at once.

A server can send what answers nothing (notifications, log messages, keep-alive
comments, responses nobody waits for, lines too long to keep, its stderr) as fast as its
connection carries it, and each
piece costs mcpd the time to decode it, on the one thread every other server and
agent shares. It can also send large messages on many streams at once, each held
whole until it is complete. ``ReadBudget`` is one server's limit on both, over all
its streams (its calls' replies, its push or event stream, its stdout). Sans-IO: the
time is given, and a stream is told to wait, not made to.

* **Pace.** Reading costs units: one a line, and one each ``UNIT_BYTES`` of a
  message, or of what is read only to be thrown away (a line over the limit, an event
  stream's comment). A message that answered a request waiting for it costs nothing,
  and a message is charged once it is complete, when what it is is known (until then
  it takes room); what is thrown away, as it goes (a line over the limit may never
  end). A server has a burst of units, then a rate; past them a stream is
  told how long to wait before it reads again, and the server, no longer read,
  waits in turn (the connection's or the pipe's back-pressure). Its own replies
  come later; nobody else waits. A stream that may read sets aside what its last
  read cost first, so that streams told to wait do not all read at the moment the
  wait ends.
* **Room.** The bytes of messages not yet complete, across the server's streams, may
  not pass ``max_held``; past it, a stream waits until another's message is complete
  before it reads on. One stream at a time may read past it, so that the largest
  message there may be still completes.

``held_back`` says, for ``mcpd status``, that a server is being held back and why.

A notification is handed on only up to a size (``oversized``): a log message, a
progress note, a change of a list need far less, and what is handed on is searched
whole (for mcpd's secrets) while everyone else waits. Only a task's news may carry a
call's result, which is as large as a reply may be.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Final, Literal

import msgspec

from ..jsonrpc import messages as rpc
from ..shown.logfields import log_extra
from .buckets import Bucket

# A line costs about as much to read as this many bytes of a notification.
UNIT_BYTES: Final = 256
# A server's units a second, unless its config says otherwise: far more lines than its
# log messages and progress notes need, and a small share of one CPU. It may spend
# this many seconds' worth at once.
DEFAULT_RATE: Final = 5000
BURST_SECONDS: Final = 4
MAX_NOTIFICATION: Final = 1024 * 1024
_MAY_CARRY_RESULTS: Final = frozenset({"notifications/tasks"})
# How long after the last wait a server is still shown as held back.
SHOWN_FOR: Final = 10.0

WaitReason = Literal["pace", "room"]


class HeldBack(msgspec.Struct, frozen=True):
    """A server whose streams mcpd reads more slowly than it sends: why, and since when
    (the caller's clock)."""

    reason: str
    since: float


def cost(message: bytes) -> float:
    """The units reading a message (an event's data, a line) that answered nothing
    cost: a unit a line, and one each ``UNIT_BYTES``."""
    return message.count(b"\n") + 1 + len(message) / UNIT_BYTES


def skipped(size: int) -> float:
    """The units reading ``size`` bytes that were thrown away unread cost: what as many
    bytes of a message cost."""
    return size / UNIT_BYTES


def oversized(method: str, params: bytes | None) -> bool:
    """Whether a notification is larger than any of its kind needs to be."""
    return (
        params is not None and len(params) > MAX_NOTIFICATION and method not in _MAY_CARRY_RESULTS
    )


def drop_oversized(
    label: str,
    msg: rpc.Notification,
    complain: Callable[[], str | None],
    log: logging.Logger,
) -> bool:
    """Whether a notification is too large to hand on (``oversized``):
    then it is dropped, with a warning if ``complain`` (the server's budget of
    warnings) lets one be said now."""
    if not oversized(msg.method, msg.params):
        return False
    note = complain()
    if note is not None:
        log.warning(
            "%s: dropped a %s notification of %d bytes, more than the %d any of its kind needs%s",
            label,
            msg.method,
            len(msg.params or b""),
            MAX_NOTIFICATION,
            note,
            extra=log_extra(label, "notification_too_large"),
        )
    return True


class _Stream:
    __slots__ = ("aside", "held", "last")

    def __init__(self) -> None:
        self.held = 0  # bytes of a message not yet complete
        self.last = 0.0  # what its last read cost
        self.aside = 0.0  # what was set aside for the read under way


class ReadBudget:
    def __init__(self, max_held: int, rate: int = DEFAULT_RATE) -> None:
        self.max_held = max_held
        self.rate = rate
        self.burst = rate * BURST_SECONDS
        self._bucket = Bucket(tokens=float(self.burst), stamp=-1e18)
        self._streams: dict[int, _Stream] = {}
        self._keys = itertools.count()
        self._held = 0
        self._past: int | None = None  # the stream reading past max_held
        self._why: WaitReason = "pace"
        self._since = 0.0
        self._last = -1e18

    def open(self) -> int:
        """A new stream of the server's; its key."""
        key = next(self._keys)
        self._streams[key] = _Stream()
        return key

    def close(self, key: int) -> bool:
        """The stream is done; whether that made room others may wait for."""
        s = self._streams.pop(key, None)
        if s is None:
            return False
        self._held -= s.held
        if self._past == key:
            self._past = None
            return True
        return s.held > 0

    # -- the common read: nothing held, nothing owed --

    def free(self, key: int, held: int) -> bool:
        """Whether the stream may read now with nothing to weigh: it holds no part of a
        message, neither does it read past ``max_held``, its last read cost nothing, and
        the server owes nothing (what it gained since its last read is counted at its
        next charge). Most reads are of replies alone: they pay for nothing."""
        s = self._streams[key]
        return not (
            held
            or s.held
            or s.last
            or self._bucket.tokens < 0.0
            or self._held > self.max_held
            or self._past == key
        )

    def charged(self, key: int) -> bool:
        """Whether the stream's last read, or what was set aside for this one, cost
        anything (a read that answered requests alone then needs no account)."""
        s = self._streams[key]
        return bool(s.last or s.aside)

    # -- pace --

    def pace(self, now: float, key: int) -> float:
        """Seconds the stream must wait before it reads; at 0 it may read now, and
        what its last read cost is set aside for this one."""
        s = self._streams[key]
        wait = self._bucket.spend(now, self.burst, self.rate, 0.0)
        if wait > 0.0:
            return wait
        self._bucket.spend(now, self.burst, self.rate, s.last)
        s.aside = s.last
        return 0.0

    def read(self, now: float, key: int, units: float) -> None:
        """What the stream's read cost, in units (what answered a request taken out:
        negative, it gives back what earlier reads were charged for an answer's lines)."""
        s = self._streams[key]
        self._bucket.spend(now, self.burst, self.rate, units - s.aside)
        s.aside = 0.0
        s.last = max(units, 0.0)

    # -- room --

    def hold(self, key: int, held: int) -> bool:
        """The stream holds ``held`` bytes of a message not yet complete; whether that
        made room others may wait for."""
        s = self._streams[key]
        freed = held < s.held
        self._held += held - s.held
        s.held = held
        if self._past == key and held == 0:
            self._past = None
            freed = True
        return freed

    def may_read(self, key: int) -> bool:
        """Whether the stream may read on, as things are held now."""
        if self._held <= self.max_held or self._past == key:
            return True
        if self._past is None and self._streams[key].held > 0:
            self._past = key  # the one that may complete a message past the limit
            return True
        return False

    # -- what status shows --

    def held_back(self, now: float) -> HeldBack | None:
        if now - self._last > SHOWN_FOR:
            return None
        return HeldBack(self._reason(), self._since)

    def note(self, now: float, why: WaitReason) -> bool:
        """A stream of the server's waits (``why``: for the pace or for room); whether
        that begins a spell of holding it back, which is worth saying."""
        begins = now - self._last > SHOWN_FOR
        if begins:
            self._since = now
        self._last = now
        self._why = why
        return begins

    def _reason(self) -> str:
        if self._why == "room":
            return (
                f"its replies being read hold {_size(self.max_held)} of messages not yet "
                "complete, the most mcpd holds for one server: each waits its turn"
            )
        return (
            "it sends more than mcpd reads of what answers no request (notifications, "
            "comments, responses nobody waits for, lines over the limit, its stderr): "
            f"{self.rate:,.0f} lines (or "
            f"{UNIT_BYTES}-byte pieces) a second after a burst of {self.burst:,}, so its "
            "streams are read more slowly"
        )


def _size(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n:,} bytes"
