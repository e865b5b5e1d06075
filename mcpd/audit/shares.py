"""Who gives up a place when the audit log's buffer is full (the disk or journald fell
behind): not whoever came last, but the user (uid) holding the most records in it, and
of that user's processes the one holding the most. A flood loses its own records first,
however many processes it is spread over, and the few of an agent calling at its usual
pace are still written: an agent of another user's always, and one of the flooding
user's as long as it holds fewer than each process of the flood.

The counts are worked out once when the buffer fills, and kept up while it stays full;
the writer's next batch takes the buffer and they start again.
"""

from __future__ import annotations

from collections import Counter

from .record import CallRecord, ProcessKey, process_key

User = int | None  # a uid; None: not known (an agent over TCP)


class Shares:
    """What each user, and each of its processes, holds of a full ``buffer``."""

    def __init__(self, buffer: list[CallRecord]) -> None:
        self._buffer = buffer
        self._users: Counter[User] = Counter()
        self._held: dict[User, Counter[ProcessKey]] = {}
        # For each agent, an index at or after its newest record's: where a search for
        # it starts. Records only leave below it, so it stays at or after.
        self._newest: dict[ProcessKey, int] = {}
        for i, record in enumerate(buffer):
            self._add(process_key(record.agent), i)

    def make_room(self, record: CallRecord) -> bool:
        """Whether ``record`` may be appended to the buffer: if its user holds fewer
        records than another, that one's process holding the most gives up its newest;
        else, if its process holds fewer than another of its user's, that one does (and
        the record taken out is to be counted as dropped); else ``record`` is the one
        dropped."""
        key = process_key(record.agent)
        user = key[0]
        users = self._users
        most, holds = max(users.items(), key=_second)
        if users[user] >= holds:
            most = user  # room is made among its own user's processes, or not at all
        held = self._held[most]
        victim, victim_holds = max(held.items(), key=_second)
        if most == user and held[key] >= victim_holds:
            return False
        buffer = self._buffer
        i = min(self._newest[victim], len(buffer) - 1)
        while process_key(buffer[i].agent) != victim:
            i -= 1
        del buffer[i]
        self._remove(victim, i)
        self._add(key, len(buffer))  # where ``record`` goes
        return True

    def _add(self, key: ProcessKey, i: int) -> None:
        user = key[0]
        self._users[user] += 1
        self._held.setdefault(user, Counter())[key] += 1
        self._newest[key] = i

    def _remove(self, key: ProcessKey, i: int) -> None:
        """``key``'s record at ``i`` left the buffer."""
        user = key[0]
        held = self._held[user]
        held[key] -= 1
        self._users[user] -= 1
        if held[key]:
            self._newest[key] = i - 1
            return
        del held[key], self._newest[key]
        if not held:
            del self._held[user], self._users[user]


def _second(item: tuple[object, int]) -> int:
    return item[1]
