"""Who may not decide whose call: the agent's side and the decider's, as /proc told.

A call waiting for approval must be decided by a person, not by the agent that made
it with the tools it is given. So mcpd keeps, of each agent, its ``AgentKin``: its
process, the processes that started it (``_hosts``: a host whose shell tool is its
relay's sibling) and the sessions they are in, read while the agent was there to be
read: when it connected, or for an agent on the TCP endpoint, whose process the
kernel does not name, at its first request to /mcp (``tcp_kin``: the processes that
hold its connection). A decider (``Decider``) is read when it
connects: its process, those it descends from, and its session (on the TCP endpoint,
``tcp_deciders``: each process that holds its connection). A decider that is
one of the agent's processes or descends from one, or shares a session with them,
may not decide; and where the agent's process could not be found, no decider of its
user on the socket may, since nothing tells it from the agent's children.

A process is its pid and its start time: a pid names another process once the first
is gone, and a start time tells the two apart. What /proc cannot say (a process gone,
or hidden) matches by pid alone, so that an unreadable start time never lets anyone
through. A session read as 0 (begun outside mcpd's PID namespace) says nothing of who
is beside whom, and matches nobody.

An agent that disconnects still has its processes: a host whose shell tool ends its
bridge first, an HTTP client between connections, a child left in its session. So
``policy.departed`` keeps the kin of an agent gone for as long as one of its
processes (``alive``) or a process in one of its sessions is still there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final, Literal, TypeVar

import msgspec

from protocol.proctcp import Holder

from ..local.tcpowner import OwnerUnknown, holding, holds, tcp_holder

if TYPE_CHECKING:
    import trio

_T = TypeVar("_T")

_LINEAGE: Final = 64
# Relays and launchers between a host and its agent's process: a few at most.
_HOSTS: Final = 16
# Fields of /proc/PID/stat, counted from the state (0) after the name.
_PARENT: Final = 1
_SESSION: Final = 3
_TERMINAL: Final = 4
_STARTED: Final = 19


def _stat(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The name (field 2) is in parentheses and may hold anything, spaces included.
    return stat[stat.rfind(b")") + 2 :].split()


def _field(fields: list[bytes] | None, index: int) -> int | None:
    if fields is None:
        return None
    try:
        return int(fields[index])
    except (IndexError, ValueError):
        return None


def parent_of(pid: int) -> int | None:
    return _field(_stat(pid), _PARENT)


def session_of(pid: int) -> int | None:
    """The session ``pid`` is in (a terminal's, or a service's), 0 or None if unknown."""
    return _field(_stat(pid), _SESSION)


class Process(msgspec.Struct, frozen=True):
    pid: int
    started: int | None = None  # clock ticks after boot; None: not read

    def among(self, processes: tuple[Process, ...]) -> bool:
        """Whether this is one of ``processes`` (by pid alone where either start time
        is unknown)."""
        return any(
            p.pid == self.pid
            and (p.started is None or self.started is None or p.started == self.started)
            for p in processes
        )


class Decider(msgspec.Struct, frozen=True):
    """Who decides a call waiting for approval, as /proc told when they asked: their
    process and those it descends from, their session and user; ``page``: on the
    status page (whoever ran ``mcpd dashboard``, in a browser)."""

    lineage: tuple[Process, ...] = ()
    session: int | None = None
    uid: int | None = None
    page: bool = False


def decider_of(pid: int, limit: int = _LINEAGE) -> Decider:
    lineage: list[Process] = []
    session: int | None = None
    current: int | None = pid
    while current is not None and current > 1 and len(lineage) < limit:
        fields = _stat(current)
        lineage.append(Process(current, _field(fields, _STARTED)))
        if current == pid:
            session = _field(fields, _SESSION)
        current = _field(fields, _PARENT)
    return Decider(tuple(lineage), session)


# How a decider is kin to an agent: it is (or descends from) the agent's process, or
# what started it; it shares a session with them; or the agent's process is unknown,
# and the decider is of its user, on the socket; or mcpd keeps as many agents gone as
# it can, and cannot tell anyone from one it could not keep (``crowd``).
Tie = Literal["agent", "host", "session", "unknown", "crowd"]


class AgentKin(msgspec.Struct, frozen=True, kw_only=True):
    """Who may not decide an agent's calls. ``unknown``: why its process could not be
    found; then no decider of its user (``uid``; None: of any user) may decide them on
    the socket. ``crowd``: why no one may decide, anywhere (``policy.departed``)."""

    agents: tuple[Process, ...] = ()
    hosts: tuple[Process, ...] = ()  # what started ``agents``: a host, its relay's launcher
    sessions: frozenset[int] = frozenset()
    unknown: str | None = None
    uid: int | None = None
    crowd: str | None = None

    def tie(self, decider: Decider) -> tuple[Tie, int | None] | None:
        """How ``decider`` is kin to this agent (and the pid it is kin through), or None."""
        if self.crowd is not None:
            return "crowd", None
        ties: tuple[tuple[Tie, tuple[Process, ...]], ...] = (
            ("agent", self.agents),
            ("host", self.hosts),
        )
        for tie, processes in ties:
            for p in processes:
                if p.among(decider.lineage):
                    return tie, p.pid
        if decider.session and decider.session in self.sessions:
            return "session", None
        # Where the agent's process is unknown, a decider of its user on the socket may be
        # one it started; in a browser, on the page, it is taken for a person.
        its_user = self.uid is None or decider.uid == self.uid
        if self.unknown is not None and its_user and not decider.page:
            return "unknown", None
        return None


def agent_tie(decider: Decider, agents: Iterable[AgentKin]) -> tuple[Tie, int | None] | None:
    """How ``decider`` is kin to the first of ``agents`` it is kin to, passing over an
    agent whose process is unknown (nothing says whose ``decider`` is, then); None: to
    none of them."""
    return Kinship(agents).tie(decider)


# Where a tie is found among the agents: the agent's place in their order, the tie's
# rank within an agent (its processes, then its hosts, then its session) and the
# process's place among those of that rank. The least is the tie ``AgentKin.tie`` of
# the first agent kin to a decider gives.
_Place = tuple[int, int, int]
_SESSION_RANK: Final = 2


class Kinship:
    """The agents connected now, looked up by their processes and sessions: what
    ``agent_tie`` says of a decider, in one look per process of its lineage rather
    than a pass over every agent's processes. Many deciders (every session of the
    status page) are judged against the same agents, and an agent may fill its
    process tree and connect many times: made once, it keeps that cost to the size of
    the agents plus the deciders'."""

    def __init__(self, agents: Iterable[AgentKin]) -> None:
        self._processes: dict[int, list[tuple[_Place, Tie, Process]]] = {}
        self._sessions: dict[int, int] = {}
        self._crowd: int | None = None
        for order, kin in enumerate(agents):
            if kin.crowd is not None and self._crowd is None:
                self._crowd = order
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

    @property
    def empty(self) -> bool:
        return not self._processes and not self._sessions and self._crowd is None

    def tie(self, decider: Decider) -> tuple[Tie, int | None] | None:
        best: tuple[_Place, Tie, int | None] | None = None
        for own in decider.lineage:
            for place, tie, process in self._processes.get(own.pid, ()):
                if (best is None or place < best[0]) and process.among((own,)):
                    best = (place, tie, process.pid)
        order = self._sessions.get(decider.session) if decider.session else None
        if order is not None and (best is None or (order, _SESSION_RANK, 0) < best[0]):
            best = ((order, _SESSION_RANK, 0), "session", None)
        crowd = self._crowd
        if crowd is not None and (best is None or (crowd, 0, 0) < best[0]):
            best = ((crowd, 0, 0), "crowd", None)
        return None if best is None else (best[1], best[2])


def unknown(why: str, uid: int | None) -> AgentKin:
    return AgentKin(unknown=why, uid=uid)


def kin_of(pid: int) -> AgentKin:
    """The agent that is process ``pid``, as /proc says now."""
    fields = _stat(pid)
    session = _field(fields, _SESSION)
    hosts = _hosts(_field(fields, _PARENT), session, _field(fields, _TERMINAL))
    sessions = {session, *(session_of(h.pid) for h in hosts)}
    return AgentKin(
        agents=(Process(pid, _field(fields, _STARTED)),),
        hosts=hosts,
        sessions=frozenset(s for s in sessions if s),
    )


def _hosts(parent: int | None, session: int | None, terminal: int | None) -> tuple[Process, ...]:
    """What started an agent in ``session`` whose parent is ``parent``: the processes
    above it in its session, and the first one above them outside it, with its session.
    Whatever their command lines read: a host may reach mcpd through any relay (``mcpd
    bridge``, socat, mcp-remote), started through a launcher that forks (``uv run``,
    ``npx``, ``sh -c``), in a session of its own (``setsid``), and its shell tool
    descends from the host, not from the relay. Where the agent's session has a
    terminal (``terminal``), the climb ends at its leader, the terminal's shell: what
    started that shell (a terminal emulator, tmux, sshd) starts other terminals too,
    a person's among them."""
    hosts: list[Process] = []
    current = parent
    while current is not None and current > 1 and len(hosts) < _HOSTS:
        fields = _stat(current)
        hosts.append(Process(current, _field(fields, _STARTED)))
        if not session or _field(fields, _SESSION) != session:
            break
        if current == session and terminal:
            break
        current = _field(fields, _PARENT)
    return tuple(hosts)


def tcp_kin(sock: trio.socket.SocketType, until: float) -> AgentKin:
    """The agent that holds the other end of the TCP connection ``sock``: every
    process that holds it, as far as /proc is read by ``until`` (``time.monotonic``).
    It blocks while it reads /proc."""
    try:
        held = tcp_holder(sock)
    except OwnerUnknown:
        return unknown("the kernel did not say which user holds its TCP connection", None)
    try:
        found = _read_holders(held, kin_of, until)
    except TimeoutError:
        return unknown("looking for it in /proc took too long", held.uid)
    if not found:
        why = f"no process of uid {held.uid} that mcpd can read holds its TCP connection"
        return unknown(why, held.uid)
    return AgentKin(
        agents=tuple(p for k in found for p in k.agents),
        hosts=tuple(p for k in found for p in k.hosts),
        sessions=frozenset(s for k in found for s in k.sessions),
        uid=held.uid,
    )


def tcp_deciders(sock: trio.socket.SocketType, until: float) -> tuple[Decider, ...]:
    """Each process that holds the other end of the TCP connection ``sock``, as a
    decider; none where they cannot be found by ``until`` (``time.monotonic``). It
    blocks while it reads /proc."""
    try:
        held = tcp_holder(sock)
        return tuple(_read_holders(held, decider_of, until))
    except (OwnerUnknown, TimeoutError):
        return ()


def _read_holders(held: Holder, read: Callable[[int], _T], until: float) -> list[_T]:
    """``read`` of each process that holds ``held``, as it holds it still once read:
    its pid did not pass to another process meanwhile."""
    link = f"socket:[{held.inode}]"
    found: list[_T] = []
    for pid in holding(held, until):
        it = read(pid)
        if holds(f"/proc/{pid}", link):
            found.append(it)
    return found


def alive(process: Process) -> bool:
    """Whether ``process`` is still there: its pid names a process started when it
    was (by pid alone where its start time was not read)."""
    started = _field(_stat(process.pid), _STARTED)
    if started is None:
        return False
    return process.started is None or started == process.started


def crowded(kin: AgentKin) -> str:
    """Why no one decides while mcpd keeps as many agents gone as it can."""
    return (
        f"{kin.crowd}, so it cannot tell anyone from a process of one it could not keep: "
        "nothing is decided until those agents' processes end; then decide it from a "
        "terminal of your own, one no agent started"
    )


def not_yours(kin: AgentKin, tie: Tie, pid: int | None) -> str:
    """Why a decider kin to the agent (``tie``, through process ``pid``) may not decide
    its call, and where a person can."""
    if tie == "agent":
        return (
            f"the agent that made this call (pid {pid}), or a process it started, cannot "
            "decide it; decide it from a terminal of your own, one the agent did not start"
        )
    if tie == "host":
        return (
            f"the host that started the agent that made this call (pid {pid}; its relay, "
            "such as mcpd bridge, or a launcher), or a process it started (such as its "
            "shell tool), cannot decide it; decide it from a terminal of your own, one the "
            "host did not start"
        )
    if tie == "crowd":
        return crowded(kin)
    if tie == "session":
        return (
            "a process in the same session as the agent that made this call (a tool its "
            "host started, the terminal it runs in) cannot decide it; decide it from "
            "another terminal"
        )
    if kin.uid is None:
        return (
            f"mcpd could not find the process that made this call ({kin.unknown}), so it "
            "cannot tell anyone here from a process the agent started: decide it on the "
            "status page (`mcpd dashboard`)"
        )
    return (
        f"mcpd could not find the process that made this call ({kin.unknown}), so it "
        f"cannot tell a process of uid {kin.uid} here from one the agent started: decide "
        "it on the status page (`mcpd dashboard`), or as another user who may decide "
        "(root, or mcpd's own user)"
    )
