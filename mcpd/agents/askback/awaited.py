"""Where the outcome of a call goes that a task of its agent's request waits for: it
is handed over once, and the task awaits it."""

from __future__ import annotations

import trio

from ...servers.shared import Outcome
from ..agent import AgentCall, OutcomeSink


class Awaited(OutcomeSink):
    """The outcome of one round of a call, awaited by a task of its agent's request."""

    __slots__ = ("_arrived", "_outcome")

    def __init__(self) -> None:
        self._arrived = trio.Event()
        self._outcome: Outcome | None = None

    def finish(self, call: AgentCall, outcome: Outcome) -> None:
        self._outcome = outcome
        self._arrived.set()

    async def outcome(self) -> Outcome:
        await self._arrived.wait()
        assert self._outcome is not None
        return self._outcome
