"""Agents gone whose processes live on, still kept from deciding (``policy.kin``).

An agent that disconnects may leave processes behind: its host, whose shell tool
ended the relay first; a child in its session, which the agent need not wait for.
Each is kept from deciding for as long as it runs: an agent gone is kept while its
own process, one that started it, or any process in one of its sessions lives.

What of an agent has ended is dropped as it goes, and agents that leave the same
processes behind (bridges one host starts and ends by the hundred) are kept once.
How many are kept has a bound, as each one kept is read from /proc whenever someone
decides. One still living is never forgotten to make room: an agent that starts
processes by the hundred, each connecting and leaving, would otherwise push its own
out and decide. Those that ended go first; when every one kept still runs, the next
is not kept and no one decides (``AgentKin.crowd``) until every one kept has ended.
"""

from __future__ import annotations

import os
from typing import Final

import msgspec

from .kin import AgentKin, alive, session_of

_DEPARTED: Final = 256


class Departed:
    """The kin of agents that disconnected while a process of theirs lives on."""

    def __init__(self, limit: int = _DEPARTED) -> None:
        self._limit = limit
        self._kin: list[AgentKin] = []
        self._crowded = False

    def left(self, kin: AgentKin) -> None:
        """An agent disconnected; ``kin``: as read while it was there."""
        living = _Living()
        left = living.left_of(kin)
        if left is None or left in self._kin:
            return
        if len(self._kin) >= self._limit:
            self._kin = [k for k in self._kin if living.kin(k)]
        if len(self._kin) >= self._limit:
            self._crowded = True
            return
        self._kin.append(left)

    def living(self) -> list[AgentKin]:
        """Those kept with a process still alive (the others are forgotten now); while
        one could not be kept, a kin every decider is tied to, saying why."""
        if not self._kin and not self._crowded:
            return []
        living = _Living()
        self._kin = [k for k in self._kin if living.kin(k)]
        if not self._kin:
            self._crowded = False
        if not self._crowded:
            return list(self._kin)
        why = (
            f"mcpd keeps as many agents gone whose processes still run as it can "
            f"({self._limit}), and more have gone since"
        )
        return [*self._kin, AgentKin(crowd=why)]


class _Living:
    """What runs now: the sessions processes are in, read from /proc once, when first
    asked for."""

    def __init__(self) -> None:
        self._sessions: set[int] | None = None

    def left_of(self, kin: AgentKin) -> AgentKin | None:
        """What of ``kin`` still runs; None: nothing."""
        agents = tuple(p for p in kin.agents if alive(p))
        hosts = tuple(p for p in kin.hosts if alive(p))
        sessions = kin.sessions & self.sessions()
        if not agents and not hosts and not sessions:
            return None
        return msgspec.structs.replace(kin, agents=agents, hosts=hosts, sessions=sessions)

    def kin(self, kin: AgentKin) -> bool:
        if any(alive(p) for p in (*kin.agents, *kin.hosts)):
            return True
        return bool(kin.sessions & self.sessions())

    def sessions(self) -> set[int]:
        if self._sessions is None:
            self._sessions = set()
            for name in os.listdir("/proc"):
                if name.isdigit():
                    session = session_of(int(name))
                    if session:
                        self._sessions.add(session)
        return self._sessions
