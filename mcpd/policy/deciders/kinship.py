"""A decider looked up among many agents at once (``policy.deciders.kin``'s rule, each agent
in turn): every agent connected now, and those gone whose processes live on."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec

from .kin import AgentKin, Decider, Process, Tie


class Found(msgspec.Struct, frozen=True):
    """How a decider is kin to one of the agents (``Kinship``): the tie, the pid it is
    through, and the agent (a gone one's kin, a crowd's)."""

    tie: Tie
    pid: int | None
    kin: AgentKin


# Where a tie is found among the agents: the agent's place in their order, the tie's
# rank within an agent (its processes, then its hosts, then its session) and the
# process's place among those of that rank. The least is the tie ``AgentKin.tie`` of
# the first agent kin to a decider gives.
_Place = tuple[int, int, int]
_SESSION_RANK: Final = 2


class Kinship:
    """The agents connected now, looked up by their processes and sessions: how a
    decider is kin to the first of them it is kin to (``kin``'s rule, agent by agent;
    an agent whose process is unknown is passed over), in one look per process of its
    lineage rather than a pass over every agent's processes. Many deciders (every session of the
    status page) are judged against the same agents, and an agent may fill its
    process tree and connect many times: made once, it keeps that cost to the size of
    the agents plus the deciders'."""

    def __init__(self, agents: Iterable[AgentKin]) -> None:
        self._kin = list(agents)
        self._processes: dict[int, list[tuple[_Place, Tie, Process]]] = {}
        self._sessions: dict[int, int] = {}
        self._owned: dict[int, int] = {}
        self._crowds: list[int] = []
        for order, kin in enumerate(self._kin):
            if kin.crowd is not None:
                self._crowds.append(order)
            ranked: tuple[tuple[Tie, tuple[Process, ...]], ...] = (
                ("agent", kin.agents),
                ("host", kin.hosts),
            )
            for rank, (tie, processes) in enumerate(ranked):
                for place, process in enumerate(processes):
                    found = self._processes.setdefault(process.pid, [])
                    found.append(((order, rank, place), tie, process))
            for session in kin.sessions:
                self._sessions.setdefault(session, order)
            for session in kin.owned:
                self._owned.setdefault(session, order)

    @property
    def empty(self) -> bool:
        return not self._kin

    def tie(self, decider: Decider) -> tuple[Tie, int | None] | None:
        found = self.found(decider)
        return None if found is None else (found.tie, found.pid)

    def found(self, decider: Decider) -> Found | None:
        best: tuple[_Place, Tie, int | None] | None = None
        for own in decider.lineage:
            for place, tie, process in self._processes.get(own.pid, ()):
                if (best is None or place < best[0]) and process.among((own,)):
                    best = (place, tie, process.pid)
        order = self._sessions.get(decider.session) if decider.session else None
        if order is not None and (best is None or (order, _SESSION_RANK, 0) < best[0]):
            best = ((order, _SESSION_RANK, 0), "session", None)
        # Through the lineage, a session some agent's process leads: its leader named.
        for session in sorted(decider.sessions):
            order = self._owned.get(session)
            if order is not None and (best is None or (order, _SESSION_RANK, 1) < best[0]):
                best = ((order, _SESSION_RANK, 1), "session", session)
        crowd = next((c for c in self._crowds if decider.may_be_of(self._kin[c].uid)), None)
        if crowd is not None and (best is None or (crowd, 0, 0) < best[0]):
            best = ((crowd, 0, 0), "crowd", None)
        if best is None and decider.cut and self._kin:
            # Any agent may be among what was not read.
            best = ((0, 0, 0), "deep", None)
        if best is None:
            return None
        (order, _, _), tie, pid = best
        return Found(tie, pid, self._kin[order])
