"""The calls waiting for a server's slot, taken in turns by whose they are.

A queue taken in arrival order lets one agent that queued many long calls hold every
other agent's call behind them until it times out. Here each agent connection with
calls waiting takes its turn: a freed slot goes to the earliest call of the next
owner in the rotation, so a newcomer waits for at most one call of each other owner.

Calls still leave by their deadlines in arrival order (``first``), which is what the
scheduler's timer reads. While one owner has every waiting call, as a single busy
agent does, the queue is a plain deque and keeps no counts.

The bytes each waiting call keeps are held in the daemon's ``QueueBytes`` from the
moment it is queued until it leaves, whichever way it leaves.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator

from .agent_key import NOBODY, AgentKey
from .calls import Call
from .queue_bytes import QueueBytes


class TurnQueue:
    __slots__ = ("_bytes", "_held", "_sole", "_turns", "calls")

    def __init__(self, kept: QueueBytes | None = None) -> None:
        self._bytes = QueueBytes() if kept is None else kept
        # In arrival order; read it, change it through the methods. The scheduler asks
        # it whether any call waits, on every call: a method of its own cost a frame.
        self.calls: deque[Call] = deque()
        self._sole: AgentKey = NOBODY  # the one owner of every call, while _held is None
        # Calls waiting per owner, and the owners in the order of their turns: kept
        # only while two or more owners have calls waiting.
        self._held: dict[AgentKey, int] | None = None
        self._turns: deque[AgentKey] = deque()

    def __len__(self) -> int:
        return len(self.calls)

    def __iter__(self) -> Iterator[Call]:
        return iter(self.calls)

    def first(self) -> Call:
        """The call that arrived first, whose deadline is the earliest."""
        return self.calls[0]

    def last(self) -> Call:
        return self.calls[-1]

    def append(self, call: Call) -> None:
        calls = self.calls
        owner = call.owner
        if self._held is None:
            if not calls:
                self._sole = owner
            elif owner is not self._sole:
                self._share(owner)
        else:
            held = self._held
            count = held.get(owner, 0)
            held[owner] = count + 1
            if not count:
                self._turns.append(owner)
        calls.append(call)
        self._bytes.take(call)

    def _share(self, newcomer: AgentKey) -> None:
        sole = self._sole
        self._held = {sole: len(self.calls), newcomer: 1}
        # The owner that was alone has had the slots until now: the newcomer goes first.
        self._turns = deque((newcomer, sole))

    def take(self) -> Call:
        """The next call to send: the earliest of the owner whose turn it is."""
        held = self._held
        if held is None:
            call = self.calls.popleft()
            self._bytes.give(call)
            return call
        owner = self._turns.popleft()
        call = next(c for c in self.calls if c.owner is owner)
        self.calls.remove(call)
        count = held[owner] - 1
        if count:
            held[owner] = count
            self._turns.append(owner)  # its next call waits for the others' turns
        else:
            del held[owner]
            self._settle(held)
        self._bytes.give(call)
        return call

    def pop_first(self) -> Call:
        call = self.calls.popleft()
        self._gone(call)
        return call

    def remove(self, call: Call) -> None:
        self.calls.remove(call)
        self._gone(call)

    def newest_of(self, owner: AgentKey) -> Call:
        return next(c for c in reversed(self.calls) if c.owner is owner)

    def pushed_out(self, owner: AgentKey) -> Call | None:
        """The call that makes room for one of ``owner``'s in a full queue: the newest
        of the owner that holds more of it than ``owner`` would with its call (the
        most, the first to have queued among equals); None when none holds more. One
        agent filling the queue is refused its own calls, not everyone's."""
        held = Counter(self.held())
        if not held:
            return None
        top, most = held.most_common(1)[0]
        if most <= held[owner] + 1:
            return None
        return self.newest_of(top)

    def held(self) -> dict[AgentKey, int]:
        """How many calls each owner has waiting."""
        if self._held is None:
            return {self._sole: len(self.calls)} if self.calls else {}
        return dict(self._held)

    def _gone(self, call: Call) -> None:
        """``call`` left the queue out of its turn."""
        self._bytes.give(call)
        held = self._held
        if held is None:
            return
        owner = call.owner
        count = held[owner] - 1
        if count:
            held[owner] = count
        else:
            del held[owner]
            self._turns.remove(owner)
            self._settle(held)

    def _settle(self, held: dict[AgentKey, int]) -> None:
        # One owner left with calls waiting (or none): a plain deque again.
        if len(held) <= 1:
            self._sole = next(iter(held), NOBODY)
            self._held = None
            self._turns = deque()
