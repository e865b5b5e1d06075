"""Who gives up a place when the audit log's buffer is full (the disk or journald fell
behind): the agent holding the most records in it, not whoever came last. An agent
that floods the log with requests of its own then loses its own records, and the few
of an agent calling at its usual pace are still written.

The counts are worked out once when the buffer fills, and kept up while it stays full;
the writer's next batch takes the buffer and they start again.
"""

from __future__ import annotations

from collections import Counter

from .record import AgentKey, CallRecord, agent_key


class Shares:
    """What each agent holds of a full ``buffer``."""

    def __init__(self, buffer: list[CallRecord]) -> None:
        self._buffer = buffer
        self._held: Counter[AgentKey] = Counter()
        # For each agent, an index at or after its newest record's: where a search for
        # it starts. Records only leave below it, so it stays at or after.
        self._newest: dict[AgentKey, int] = {}
        for i, record in enumerate(buffer):
            key = agent_key(record.agent)
            self._held[key] += 1
            self._newest[key] = i

    def make_room(self, record: CallRecord) -> bool:
        """Whether ``record`` may be appended to the buffer: if its agent holds fewer
        records than another, that one's newest is taken out (and is to be counted as
        dropped); else ``record`` is the one dropped."""
        key = agent_key(record.agent)
        held = self._held
        most, holds = max(held.items(), key=_second)
        if held[key] >= holds:
            return False
        buffer = self._buffer
        i = min(self._newest[most], len(buffer) - 1)
        while agent_key(buffer[i].agent) != most:
            i -= 1
        del buffer[i]
        held[most] -= 1
        if held[most]:
            self._newest[most] = i - 1
        else:
            del held[most], self._newest[most]
        held[key] += 1
        self._newest[key] = len(buffer)  # where ``record`` goes
        return True


def _second(item: tuple[AgentKey, int]) -> int:
    return item[1]
