"""The caller of a call that a task of its agent's request waits for: the outcome is
handed over once, and the task awaits it."""

from __future__ import annotations

import trio

from ...servers.shared import Call, Outcome, Whose
from ..agent import Agent


class Awaited:
    """The caller of a call a task of ``agent``'s waits for."""

    __slots__ = ("_agent", "_arrived", "_outcome")

    def __init__(self, agent: Agent) -> None:
        self._agent = agent
        self._arrived = trio.Event()
        self._outcome: Outcome | None = None

    def finish(self, call: Call, outcome: Outcome) -> None:
        self._outcome = outcome
        self._arrived.set()

    def whose(self) -> Whose:
        return self._agent.whose()

    async def outcome(self) -> Outcome:
        await self._arrived.wait()
        assert self._outcome is not None
        return self._outcome
