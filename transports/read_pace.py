"""One server's ``ReadBudget`` (``protocol.pacing.read_budget``), kept by its transport and shared
by every stream the transport reads: the waits it tells of, made on trio's clock.

Each stream asks ``Paced.before_read`` before it reads, and says what the read cost
(``read``: ``protocol.pacing.read_budget.cost`` of what answered nothing). A stream that may not
read yet sleeps, or (for room) waits until another stream's message is complete. The
first wait of a spell is said in the journal (``MCPD_EVENT=held_back``, rationed),
and ``held_back`` is what ``mcpd status`` shows while the spell lasts.

What taking apart what was read took of the thread every server and agent shares
(cutting lines or events out, decoding them, handing them on, answers included) adds
up in ``ReadPace.worked``: a stream says when its bytes came (``Paced.came``), and its
``read`` ends the stretch. A legacy session's push stream is not measured: handing
one of its events on may wait for an agent to answer the server.
"""

from __future__ import annotations

import logging
import time
from types import TracebackType
from typing import Final

import trio

from protocol.pacing.buckets import Throttle
from protocol.pacing.read_budget import DEFAULT_RATE, HeldBack, ReadBudget, WaitReason
from protocol.shown.logfields import log_extra

logger = logging.getLogger("mcpd.transport")

# The journal hears of a server's spells of holding back once a minute at most.
SAID_EVERY: Final = 60.0
# What a request of the server's that mcpd answers itself (a ping, a refusal) costs
# besides its reading, in ``protocol.pacing.read_budget``'s units: the answer posted
# back takes the shared thread about as long as reading this many lines.
ANSWER_COST: Final = 256.0


class ReadPace:
    def __init__(self, alias: str, max_held: int, rate: int = DEFAULT_RATE) -> None:
        self.alias = alias
        self._budget = ReadBudget(max_held, rate)
        self._room = trio.lowlevel.ParkingLot()
        self._said = Throttle(1, SAID_EVERY, trio.current_time)
        # Seconds of the shared thread spent taking apart what the server sent, so far.
        self.worked = 0.0

    def stream(self) -> Paced:
        """A stream of the server's, for as long as the ``with`` lasts."""
        return Paced(self, self._budget)

    @property
    def held_back(self) -> HeldBack | None:
        """Why the server is being read more slowly than it sends, while it is."""
        return self._budget.held_back(trio.current_time())

    def waits(self, why: WaitReason) -> None:
        budget = self._budget
        if not budget.note(trio.current_time(), why):
            return
        held = budget.held_back(trio.current_time())
        assert held is not None
        if self._said.admit() is not None:
            logger.warning(
                "%s: reading held back: %s",
                self.alias,
                held.reason,
                extra=log_extra(self.alias, "held_back", held.reason),
            )

    def answered_itself(self) -> None:
        """mcpd answered a request of the server's without an agent: what posting the
        answer back takes is charged (``ANSWER_COST``) to every stream's pace."""
        with self.stream() as paced:
            paced.read(ANSWER_COST)

    def made_room(self) -> None:
        if self._room.statistics().tasks_waiting:
            self._room.unpark_all()

    async def wait_for_room(self) -> None:
        await self._room.park()


class Paced:
    """One stream's share of its server's pace."""

    __slots__ = ("_budget", "_came", "_key", "_pace")

    def __init__(self, pace: ReadPace, budget: ReadBudget) -> None:
        self._pace = pace
        self._budget = budget
        self._key = budget.open()
        self._came: float | None = None

    def __enter__(self) -> Paced:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._budget.close(self._key):
            self._pace.made_room()

    async def before_read(self, held: int = 0) -> None:
        """Wait until the stream, holding ``held`` bytes of a message not yet complete,
        may read again."""
        budget, key = self._budget, self._key
        if budget.free(key, held):
            return
        if budget.hold(key, held):
            self._pace.made_room()
        while not budget.may_read(key):
            self._pace.waits("room")
            await self._pace.wait_for_room()
        while (wait := budget.pace(trio.current_time(), key)) > 0.0:
            self._pace.waits("pace")
            await trio.sleep(wait)

    def came(self) -> None:
        """The bytes of a read are in: what is done with them until ``read`` is what
        reading them took (``ReadPace.worked``)."""
        self._came = time.perf_counter()

    def read(self, units: float) -> None:
        """What a read cost: its lines that carried no message, and ``cost`` of each
        message it completed that answered nothing. Negative, it gives back what earlier
        reads were charged for a message that turned out to be an answer."""
        if self._came is not None:
            self._pace.worked += time.perf_counter() - self._came
            self._came = None
        if units or self._budget.charged(self._key):
            self._budget.read(trio.current_time(), self._key, units)
