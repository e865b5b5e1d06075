"""Agents gone whose processes live on, still kept from deciding (``policy.kin``).

An agent that disconnects may leave processes behind: its host, whose shell tool
ended the relay first; a child in its session, which the agent need not wait for.
Each is kept from deciding for as long as it runs: an agent gone is kept while its
own process, one that started it, or any process in one of its sessions lives.

What of an agent has ended is dropped as it goes, and agents left by the same
processes (the same hosts and sessions: bridges one host starts one after another,
each still running as it disconnects) are kept as one. How many are kept has a
bound, as each one kept is read from /proc whenever someone decides. One still
living is never forgotten to make room: an agent that starts processes by the
hundred, each connecting and leaving, would otherwise push its own out and decide.
Those that ended go first; when every one kept still runs, the next is kept with
the others of its user that found no room, together as one, and whoever may descend
from a process of that user decides nothing (``AgentKin.crowd``) until there is room
for them (one kept ends) or they end. Another user's agents do not keep root, or the
operator, from deciding.
"""

from __future__ import annotations

from typing import Final

import msgspec

from .kin import AgentKin, Process, alive, sessions_running

_DEPARTED: Final = 256
# Sessions named in a refusal, of those that keep the list full.
_NAMED: Final = 8


class Departed:
    """The kin of agents that disconnected while a process of theirs lives on."""

    def __init__(self, limit: int | None = None) -> None:
        self._limit = _DEPARTED if limit is None else limit
        self._kin: list[AgentKin] = []
        # Per user, those of its agents that found no room, as one.
        self._over: dict[int | None, AgentKin] = {}

    def left(self, kin: AgentKin) -> None:
        """An agent disconnected; ``kin``: as read while it was there."""
        living = _Living()
        left = living.left_of(kin)
        if left is None:
            return
        left = msgspec.structs.replace(left, gone=True)
        for i, kept in enumerate(self._kin):
            if _alike(kept, left):
                self._kin[i] = _joined(living.left_of(kept) or left, left)
                return
        if len(self._kin) >= self._limit:
            self._kin = living.left_of_each(self._kin)
        over = self._over.get(left.uid)
        if over is not None:
            self._over[left.uid] = _joined(over, left)
        elif len(self._kin) < self._limit:
            self._kin.append(left)
        else:
            self._over[left.uid] = left

    def living(self) -> list[AgentKin]:
        """Those kept with a process still alive (what ended is forgotten now); for
        each user some of whose agents found no room, a kin every decider that may
        descend from a process of that user is tied to, saying why."""
        if not self._kin and not self._over:
            return []
        living = _Living()
        self._kin = living.left_of_each(self._kin)
        crowds: list[AgentKin] = []
        for uid, over in list(self._over.items()):
            left = living.left_of(over)
            if left is None or len(self._kin) < self._limit:
                del self._over[uid]
                if left is not None:
                    self._kin.append(left)
                continue
            self._over[uid] = left
            crowds.append(AgentKin(crowd=self._crowded(left), uid=uid, gone=True))
        return [*self._kin, *crowds]

    def _crowded(self, over: AgentKin) -> str:
        whose = "any user" if over.uid is None else f"uid {over.uid}"
        keeping = sorted({s for k in self._kin for s in k.sessions})
        named = ", ".join(str(s) for s in keeping[:_NAMED])
        more = f" and {len(keeping) - _NAMED} more" if len(keeping) > _NAMED else ""
        theirs = ", ".join(str(s) for s in sorted(over.sessions)[:_NAMED])
        return (
            f"mcpd keeps as many agents gone whose processes still run as it can "
            f"({self._limit}) and agents of {whose} gone since found no room, so it cannot "
            f"tell a process that descends from one of {whose} from one of theirs; that "
            "lifts as soon as the processes of one agent kept end (those in sessions "
            f"{named or 'none'}{more}, or pids {_pids(self._kin)}), or those of the agents "
            f"that found no room (sessions {theirs or 'none'}, pids {_pids([over])}), or "
            "once mcpd restarts"
        )


def _pids(kin: list[AgentKin]) -> str:
    pids = sorted({p.pid for k in kin for p in (*k.agents, *k.hosts)})
    more = f" and {len(pids) - _NAMED} more" if len(pids) > _NAMED else ""
    return (", ".join(str(p) for p in pids[:_NAMED]) or "none") + more


def _alike(a: AgentKin, b: AgentKin) -> bool:
    """Whether ``a`` and ``b`` were left by the same processes: only their agents'
    own differ."""
    same = (a.hosts, a.sessions, a.uid, a.unread) == (b.hosts, b.sessions, b.uid, b.unread)
    return same and bool(a.hosts or a.sessions)


def _joined(a: AgentKin, b: AgentKin) -> AgentKin:
    """One kin that ties whoever ``a`` or ``b`` ties."""
    return msgspec.structs.replace(
        a,
        agents=_union(a.agents, b.agents),
        hosts=_union(a.hosts, b.hosts),
        sessions=a.sessions | b.sessions,
        unread=a.unread or b.unread,
    )


def _union(a: tuple[Process, ...], b: tuple[Process, ...]) -> tuple[Process, ...]:
    return a + tuple(p for p in b if p not in a)


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

    def left_of_each(self, kin: list[AgentKin]) -> list[AgentKin]:
        return [left for k in kin if (left := self.left_of(k)) is not None]

    def sessions(self) -> set[int]:
        if self._sessions is None:
            self._sessions = sessions_running()
        return self._sessions
