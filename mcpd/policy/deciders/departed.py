"""Agents gone whose processes live on, still kept from deciding (``policy.deciders.kin``).

An agent that disconnects may leave processes behind: its host, whose shell tool
ended the relay first; a child in its session, which the agent need not wait for.
Each is kept from deciding for as long as it runs, and so is what descends from one
in a session the agent or its host led: an agent gone is kept while its own process,
one that started it, or any process in one of its sessions lives.

An agent leaving is only written down, its kin as read while it was there: whether
a process is in one of its sessions can be told only by reading every process on
the machine, which is done when someone decides (``living``), once for all kept.
What of them has ended is dropped then. Agents left by the same processes (the same
hosts and sessions: bridges one host starts one after another) are kept as one, and
the processes one entry gathers between two decisions are read, to let go those
that ended, only as they double. How many are kept has a bound, as each one kept is
read from /proc whenever someone decides. One still living is never forgotten to
make room: an agent that starts processes by the hundred, each connecting and
leaving, would otherwise push its own out and decide. An agent that leaves while
the list is full is kept with the others of its user that found no room, together
as one; when someone decides, those that ended go first, and the ones that found no
room take the room there is. When every one kept still runs, whoever may descend
from a process of that user decides nothing (``AgentKin.crowd``) until there is room
for them (one kept ends) or they end. Another user's agents do not keep root, or
the operator, from deciding.
"""

from __future__ import annotations

from typing import Final

import msgspec

from .kin import AgentKin, Process, alive, sessions_running

_Key = tuple[tuple[Process, ...], frozenset[int], int | None, bool]

_DEPARTED: Final = 256
# Sessions named in a refusal, of those that keep the list full.
_NAMED: Final = 8
# Processes one entry gathers before those of them that ended are first let go.
_GATHERED: Final = 64


class Departed:
    """The kin of agents that disconnected while a process of theirs lives on."""

    def __init__(self, limit: int | None = None) -> None:
        self._limit = _DEPARTED if limit is None else limit
        self._kept: list[_Kept] = []
        # Those kept, by the processes that left them (``_key``).
        self._alike: dict[_Key, _Kept] = {}
        # Per user, those of its agents that found no room, as one.
        self._over: dict[int | None, _Kept] = {}

    def left(self, kin: AgentKin) -> None:
        """An agent disconnected; ``kin``: as read while it was there. Nothing of the
        processes that run now is read: what of it ended is dropped at the next
        decision (``living``)."""
        if not kin.agents and not kin.hosts and not kin.sessions:
            return
        key = _key(kin)
        same = None if key is None else self._alike.get(key)
        if same is not None:
            same.join(kin)
            return
        over = self._over.get(kin.uid)
        if over is not None:
            over.join(kin)
        elif len(self._kept) < self._limit:
            kept = _Kept(kin, key)
            self._kept.append(kept)
            if key is not None:
                self._alike[key] = kept
        else:
            self._over[kin.uid] = _Kept(kin, None)

    def living(self) -> list[AgentKin]:
        """Those kept with a process still alive (what ended is forgotten now); for
        each user some of whose agents found no room, a kin every decider that may
        descend from a process of that user is tied to, saying why."""
        if not self._kept and not self._over:
            return []
        now = _Running()
        self._kept = [k for k in self._kept if k.still_runs(now)]
        self._alike = {k.key: k for k in self._kept if k.key is not None}
        crowded: list[tuple[int | None, _Kept]] = []
        for uid, over in list(self._over.items()):
            runs = over.still_runs(now)
            if not runs or len(self._kept) < self._limit:
                del self._over[uid]
                if runs:
                    self._kept.append(over)
                continue
            crowded.append((uid, over))
        kept = [k.kin() for k in self._kept]
        crowds = [
            AgentKin(crowd=self._crowded(kept, over.kin()), uid=uid, gone=True)
            for uid, over in crowded
        ]
        return [*kept, *crowds]

    def _crowded(self, kept: list[AgentKin], over: AgentKin) -> str:
        whose = "any user" if over.uid is None else f"uid {over.uid}"
        keeping = sorted({s for k in kept for s in k.sessions})
        named = ", ".join(str(s) for s in keeping[:_NAMED])
        more = f" and {len(keeping) - _NAMED} more" if len(keeping) > _NAMED else ""
        theirs = ", ".join(str(s) for s in sorted(over.sessions)[:_NAMED])
        return (
            f"mcpd keeps as many agents gone whose processes still run as it can "
            f"({self._limit}) and agents of {whose} gone since found no room, so it cannot "
            f"tell a process that descends from one of {whose} from one of theirs; that "
            "lifts as soon as the processes of one agent kept end (those in sessions "
            f"{named or 'none'}{more}, or pids {_pids(kept)}), or those of the agents "
            f"that found no room (sessions {theirs or 'none'}, pids {_pids([over])}), or "
            "once mcpd restarts"
        )


def _pids(kin: list[AgentKin]) -> str:
    pids = sorted({p.pid for k in kin for p in (*k.agents, *k.hosts)})
    more = f" and {len(pids) - _NAMED} more" if len(pids) > _NAMED else ""
    return (", ".join(str(p) for p in pids[:_NAMED]) or "none") + more


def _key(kin: AgentKin) -> _Key | None:
    """What tells the processes that left ``kin``: agents whose own processes alone
    differ were left by the same ones. None: nothing but its own."""
    if not kin.hosts and not kin.sessions:
        return None
    return kin.hosts, kin.sessions, kin.uid, kin.unread


class _Kept:
    """One entry kept: the kin of an agent gone, or of many as one, their processes and
    sessions gathered in the order they came."""

    def __init__(self, kin: AgentKin, key: _Key | None) -> None:
        self.key = key  # as ``left`` found it; None: not looked up
        self._first = msgspec.structs.replace(kin, gone=True)
        self._agents = dict.fromkeys(kin.agents)
        self._hosts = dict.fromkeys(kin.hosts)
        self._sessions = set(kin.sessions)
        self._owned = set(kin.owned)
        self._unread = kin.unread
        self._read = 0  # processes gathered as of their last reading

    def join(self, kin: AgentKin) -> None:
        """Ties whoever ``kin`` ties too."""
        self._agents.update(dict.fromkeys(kin.agents))
        self._hosts.update(dict.fromkeys(kin.hosts))
        self._sessions.update(kin.sessions)
        self._owned.update(kin.owned)
        self._unread = self._unread or kin.unread
        if len(self._agents) + len(self._hosts) > max(_GATHERED, 2 * self._read):
            # Only its own processes, each read once for those gathered since.
            self._keep_alive()

    def still_runs(self, now: _Running) -> bool:
        """Drops what of it ended; False: nothing runs."""
        self._keep_alive()
        if self._sessions:
            self._sessions &= now.sessions()
            self._owned &= self._sessions
        return bool(self._agents or self._hosts or self._sessions)

    def kin(self) -> AgentKin:
        return msgspec.structs.replace(
            self._first,
            agents=tuple(self._agents),
            hosts=tuple(self._hosts),
            sessions=frozenset(self._sessions),
            owned=frozenset(self._owned),
            unread=self._unread,
        )

    def _keep_alive(self) -> None:
        self._agents = {p: None for p in self._agents if alive(p)}
        self._hosts = {p: None for p in self._hosts if alive(p)}
        self._read = len(self._agents) + len(self._hosts)


class _Running:
    """The sessions processes are in now, read from /proc once, when first asked for."""

    def __init__(self) -> None:
        self._sessions: set[int] | None = None

    def sessions(self) -> set[int]:
        if self._sessions is None:
            self._sessions = sessions_running()
        return self._sessions
