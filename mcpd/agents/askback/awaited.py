"""Where the outcome of a call goes that a task of its agent's request waits for,
round by round: each round's is handed over once, and the task awaits it."""

from __future__ import annotations

import trio

from ...servers.shared import Outcome
from ..agent import AgentCall, OutcomeSink


class Awaited(OutcomeSink):
    """The outcome of each round of a call, awaited by a task of its agent's request:
    the call's for as long as the task lasts, taken by the task one round at a time."""

    __slots__ = ("_arrived", "_outcome")

    def __init__(self) -> None:
        self._arrived = trio.Event()
        self._outcome: Outcome | None = None

    def finish(self, call: AgentCall, outcome: Outcome) -> None:
        self._outcome = outcome
        self._arrived.set()

    async def outcome(self) -> Outcome:
        """The round's outcome, once it comes; the next round's is awaited anew."""
        await self._arrived.wait()
        outcome, self._outcome = self._outcome, None
        self._arrived = trio.Event()
        assert outcome is not None
        return outcome
