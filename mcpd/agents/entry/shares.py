"""Bytes held on the agents' behalf shared out as the places are (``places``): the
unfinished lines of the sockets' line connections (``unfinished``) and the request
bodies of the HTTP side (``http.body_budget``) follow the one rule, each with a budget
of its own and a least share of its own (one full line, one full body); so do the
stores every agent fills, kept past its requests (``Holdings``: the rounds kept for
retries, ``askback.resumes``; the subscriptions, ``news.subscriptions``; the tasks,
``tasks.table``), in their counts and bytes:

- everyone together may hold the budget;
- one user other than mcpd's own and root the part of it that
  ``max_connections_per_uid`` is of ``max_connections``, the least share at least and
  the budget at most;
- mcpd's own user and root that much more as ``OWNER_RESERVE`` is of
  ``max_connections``, the least share at least.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, Literal, TypeVar

import msgspec

from ...config.tables.model import DaemonConfig
from .places import OWNER_RESERVE, uid_quota


class ByteShares(msgspec.Struct, frozen=True):
    most: int  # everyone together
    per_uid: int  # one user other than mcpd's own and root
    reserve: int  # more for mcpd's own user and root

    def passed(self, total: int, has: int, more: int) -> Literal["share", "all"] | None:
        """Which bound ``more`` bytes of a user other than mcpd's own and root would
        pass, holding ``has`` of the ``total`` held: its share before all's, so that a
        refusal names the one the user can do something about (None: neither)."""
        if has + more > self.per_uid:
            return "share"
        if total + more > self.most:
            return "all"
        return None


def byte_shares(d: DaemonConfig, budget: int, least: int) -> ByteShares:
    """The shares of ``budget`` bytes, none less than ``least``."""
    share = budget * uid_quota(d) // d.max_connections
    reserve = budget * OWNER_RESERVE // d.max_connections
    return ByteShares(budget, min(budget, max(least, share)), max(least, reserve))


def count_shares(d: DaemonConfig, most: int) -> ByteShares:
    """The shares of ``most`` things held at once (tasks, subscriptions, rounds kept
    for a retry), none less than one."""
    return byte_shares(d, most, 1)


def shares_within(shares: ByteShares) -> ByteShares:
    """``shares`` of a bound nothing may pass, mcpd's own user and root included (a
    line every URI subscribed to must fit in): their reserve is kept inside it, the
    others together filling it but for that."""
    reserve = min(shares.reserve, shares.most // 2)
    return ByteShares(shares.most - reserve, min(shares.per_uid, shares.most - reserve), reserve)


_User = int | None  # a uid; None: one mcpd cannot name
A = TypeVar("A", bound=Hashable)


class Holdings(Generic[A]):
    """What each user, and each of its agents (``A``: a connection, a process), holds
    of a store every agent fills (a count, or bytes), by the rule of the shares above:
    so that another user let in on a profile's socket cannot take it all, nor push
    mcpd's own user's and root's out of it."""

    def __init__(self) -> None:
        self.total = 0
        self._users: dict[_User, int] = {}
        self._agents: dict[_User, dict[A, int]] = {}
        self._user_of: dict[A, _User] = {}

    def of(self, uid: _User) -> int:
        return self._users.get(uid, 0)

    def user_of(self, agent: A, unheld: _User) -> _User:
        """The user of ``agent`` as it holds some (``unheld``: it holds none)."""
        return self._user_of.get(agent, unheld)

    def take(self, uid: _User, agent: A, amount: int) -> None:
        """``agent``, of the user ``uid``, holds ``amount`` more."""
        self._user_of[agent] = uid
        self.total += amount
        self._users[uid] = self.of(uid) + amount
        agents = self._agents.setdefault(uid, {})
        agents[agent] = agents.get(agent, 0) + amount

    def give(self, agent: A, amount: int) -> None:
        """``agent`` holds ``amount`` less (it held at least that much)."""
        uid = self._user_of[agent]
        self.total -= amount
        agents = self._agents[uid]
        left = agents[agent] - amount
        if left:
            agents[agent] = left
            self._users[uid] -= amount
            return
        del agents[agent], self._user_of[agent]
        if agents:
            self._users[uid] -= amount
        else:
            del self._agents[uid], self._users[uid]

    def passed(
        self, limits: ByteShares, uid: _User, own: bool, more: int
    ) -> Literal["share", "all"] | None:
        """Which bound ``more`` of the user ``uid`` (``own``: mcpd's own user or root,
        who has no share but the reserve past all's) would pass (None: neither)."""
        if own:
            return "all" if self.total + more > limits.most + limits.reserve else None
        return limits.passed(self.total, self.of(uid), more)

    def to_give_up(self, limits: ByteShares, uid: _User, own: bool, more: int) -> A | None:
        """The agent that gives up its oldest for ``more`` of the user ``uid`` to fit:
        past the user's share, its own agent holding the most; past all's, the agent
        holding the most of the user holding the most, the newcomer counted with its
        own. So a user that fills the store without end gives up its own, however many
        agents it spreads over, and not what the others hold. None: it fits, or
        nothing held would make room for it."""
        passed = self.passed(limits, uid, own, more)
        if passed is None or not self._users:
            return None
        user = uid
        if passed == "all":
            most = max(self._users, key=self._users.__getitem__)
            if uid not in self._users or self.of(uid) + more < self._users[most]:
                user = most
        agents = self._agents.get(user)
        return None if agents is None else max(agents, key=agents.__getitem__)
