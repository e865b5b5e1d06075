"""Who may not decide whose call: the agent's side and the decider's, as /proc told.

A call waiting for approval must be decided by a person, not by the agent that made
it with the tools it is given. So mcpd keeps, of each agent, its ``AgentKin``: its
process, the processes that started it (``_hosts``: a host whose shell tool is its
relay's sibling) and the sessions they are in, read while the agent was there to be
read: when it connected, or for an agent on the TCP endpoint, whose process the
kernel does not name, at its first request to /mcp (``tcp_kin``: the processes that
hold its connection). A decider (``Decider``) is read when it
connects: its process, those it descends from, and their sessions (on the TCP
endpoint, ``tcp_deciders``: each process that holds its connection). A decider that
is one of the agent's processes or descends from one, or shares a session with them,
may not decide; nor may one that descends from a process in a session one of them
leads (``AgentKin.owned``: begun by the agent, or by what started it, as ``setsid``
or a terminal's shell begins one), even once that process's parent is gone: every
process in such a session came from the agent's side. A session shared with the
agent but led by none of its processes (a desktop's login session, where a person's
terminals are started too) ties only the processes in it, not their descendants.
And where the agent's process could not be found, no decider of its user on the
socket may, since nothing tells it from the agent's children.

Each climb has a limit. A decider whose ancestors go on past it may descend from any
agent, and decides nothing while there is one; an agent whose hosts go on past it
may have started any process of its user, and no decider that may descend from one
decides its calls. Init and the user's service manager (a process that runs what
init runs) adopt orphans and start a person's programs: neither is ever a host.

A process is its pid and its start time: a pid names another process once the first
is gone, and a start time tells the two apart. What /proc cannot say (a process gone,
or hidden) matches by pid alone, so that an unreadable start time never lets anyone
through. A session read as 0 (begun outside mcpd's PID namespace) says nothing of who
is beside whom, and matches nobody.

An agent that disconnects still has its processes: a host whose shell tool ends its
bridge first, an HTTP client between connections, a child left in its session. So
``policy.deciders.departed`` keeps the kin of an agent gone for as long as one of its
processes (``alive``) or a process in one of its sessions is still there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Literal, TypeVar

import msgspec

from protocol.linux.proctcp import HeldSocket

from ...local.ownership.tcp_holder import HolderUnknown, holding, holds, tcp_holder
from .named import mcpd_command_of, program_of

if TYPE_CHECKING:
    import trio

_T = TypeVar("_T")

LINEAGE: Final = 64
# Relays and launchers between a host and its agent's process: a few at most.
HOSTS: Final = 16
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


def _uids(pid: int) -> set[int]:
    """The real and effective users process ``pid`` runs as; none where unread."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            status = f.read()
    except OSError:
        return set()
    for line in status.splitlines():
        if line.startswith(b"Uid:"):
            try:
                return {int(u) for u in line.split()[1:3]}
            except ValueError:
                return set()
    return set()


def _program(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def init_program() -> str | None:
    """The program init runs (pid 1 of mcpd's PID namespace); None where unread. Where
    its link is not mcpd's to read, the absolute path it was started as, which init
    does not rewrite."""
    program = _program(1)
    if program is not None:
        return program
    try:
        with open("/proc/1/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return None
    return os.path.realpath(argv0) if argv0.startswith("/") else None


def parent_of(pid: int) -> int | None:
    return _field(_stat(pid), _PARENT)


def session_of(pid: int) -> int | None:
    """The session ``pid`` is in (a terminal's, or a service's), 0 or None if unknown."""
    return _field(_stat(pid), _SESSION)


def sessions_running() -> set[int]:
    """The sessions the processes that run now are in: every process on the machine
    read, so only where someone decides."""
    sessions: set[int] = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            session = session_of(int(name))
            if session:
                sessions.add(session)
    return sessions


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
    status page (whoever ran ``mcpd dashboard``, in a browser). ``cut``: the climb
    stopped at its limit before init, so what it descends from above is unknown;
    ``uids``: the users the processes of its lineage run as (a user's shell that ran
    ``sudo`` among them)."""

    lineage: tuple[Process, ...] = ()
    session: int | None = None
    uid: int | None = None
    page: bool = False
    cut: bool = False
    uids: frozenset[int] = frozenset()
    # The sessions of every process of its lineage (its own among them), 0 left out.
    sessions: frozenset[int] = frozenset()

    def may_be_of(self, uid: int | None) -> bool:
        """Whether this may descend from a process of ``uid`` (None: of anyone)."""
        return uid is None or self.cut or uid in self.uids or uid == self.uid


def decider_of(pid: int, limit: int = LINEAGE) -> Decider:
    lineage: list[Process] = []
    uids: set[int] = set()
    sessions: set[int] = set()
    session: int | None = None
    current: int | None = pid
    cut = False
    while current is not None and current > 1:
        if len(lineage) >= limit:
            cut = True
            break
        fields = _stat(current)
        lineage.append(Process(current, _field(fields, _STARTED)))
        uids |= _uids(current)
        its = _field(fields, _SESSION)
        if current == pid:
            session = its
        if its:
            sessions.add(its)
        current = _field(fields, _PARENT)
    return Decider(
        tuple(lineage), session, cut=cut, uids=frozenset(uids), sessions=frozenset(sessions)
    )


# How a decider is kin to an agent: it is (or descends from) the agent's process, or
# what started it; it shares a session with them; or the agent's process is unknown,
# and the decider is of its user, on the socket; or mcpd keeps as many agents gone as
# it can, and cannot tell the decider from one it could not keep (``crowd``); or
# what the decider descends from could not be read to the end (``deep``), or what
# started the agent (``unread``), so nothing rules a tie out.
Tie = Literal["agent", "host", "session", "unknown", "crowd", "deep", "unread"]


class AgentKin(msgspec.Struct, frozen=True, kw_only=True):
    """Who may not decide an agent's calls. ``unknown``: why its process could not be
    found; then no decider of its user (``uid``; None: of any user) may decide them on
    the socket. ``unread``: the climb through what started it stopped at its limit;
    then no decider that may descend from a process of its user may decide them.
    ``crowd``: why no decider that may descend from a process of ``uid`` may decide,
    anywhere (``policy.deciders.departed``). ``gone``: it disconnected."""

    agents: tuple[Process, ...] = ()
    hosts: tuple[Process, ...] = ()  # what started ``agents``: a host, its relay's launcher
    sessions: frozenset[int] = frozenset()
    # Of ``sessions``, those one of ``agents`` or ``hosts`` leads (its pid is the
    # session's): whatever descends from a process in one is the agent's.
    owned: frozenset[int] = frozenset()
    unknown: str | None = None
    uid: int | None = None
    crowd: str | None = None
    unread: bool = False
    gone: bool = False
    # What its process ran when it connected (``named``), to tell a person which of
    # their programs was the agent: the program the kernel named, and the command of
    # mcpd's its command line read as (``mcpd call``), if it did.
    program: str | None = None
    command: str | None = None

    def tie(self, decider: Decider) -> tuple[Tie, int | None] | None:
        """How ``decider`` is kin to this agent (and the pid it is kin through), or None.
        A session tie through the decider's lineage names the session's leader (its id);
        one the decider itself is in names none."""
        if self.crowd is not None:
            return ("crowd", None) if decider.may_be_of(self.uid) else None
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
        through = decider.sessions & self.owned
        if through:
            return "session", min(through)
        # Where the agent's process is unknown, a decider of its user on the socket may be
        # one it started; in a browser, on the page, it is taken for a person.
        its_user = self.uid is None or decider.uid == self.uid
        if self.unknown is not None and its_user and not decider.page:
            return "unknown", None
        if decider.cut:
            return "deep", None
        if self.unread and decider.may_be_of(self.uid):
            return "unread", self.agents[0].pid if self.agents else None
        return None


def unknown_kin(why: str, uid: int | None) -> AgentKin:
    return AgentKin(unknown=why, uid=uid)


def kin_of(pid: int, limit: int = HOSTS) -> AgentKin:
    """The agent that is process ``pid``, as /proc says now; ``limit``: how many
    processes above it are read at most as what started it."""
    fields = _stat(pid)
    session = _field(fields, _SESSION)
    climb = _Climb(session, _field(fields, _TERMINAL), limit, init_program())
    hosts, cut = climb.hosts(_field(fields, _PARENT))
    led = {pid: session, **{h.pid: session_of(h.pid) for h in hosts}}
    return AgentKin(
        agents=(Process(pid, _field(fields, _STARTED)),),
        hosts=hosts,
        sessions=frozenset(s for s in led.values() if s),
        owned=frozenset(s for p, s in led.items() if s == p),
        unread=cut,
        program=program_of(pid),
        command=mcpd_command_of(pid),
    )


class _Climb:
    """The climb from an agent in ``session`` (with a terminal: ``terminal``) through
    what started it, up to ``limit`` processes; ``init``: the program pid 1 runs."""

    def __init__(self, session: int | None, terminal: int | None, limit: int, init: str | None):
        self._session = session
        self._terminal = terminal
        self._limit = limit
        self._init = init

    def keeper(self, pid: int) -> bool:
        """Whether ``pid`` is init, or the user's service manager (``systemd --user``
        runs the program pid 1 runs; only ``exec`` changes what a process runs): each
        adopts the orphans of every process below it, and starts a person's terminals
        and programs too, so it is never an agent's host."""
        return pid <= 1 or (self._init is not None and _program(pid) == self._init)

    def hosts(self, parent: int | None) -> tuple[tuple[Process, ...], bool]:
        """What started the agent, whose parent is ``parent``, and whether the climb
        stopped at its limit: the processes above it in its session, and the first one
        above them outside it, with its session. Whatever their command lines read: a
        host may reach mcpd through any relay (``mcpd bridge``, socat, mcp-remote),
        started through a launcher that forks (``uv run``, ``npx``, ``sh -c``), in a
        session of its own (``setsid``), and its shell tool descends from the host, not
        from the relay. Where the agent's session has a terminal, the climb ends at its
        leader, the terminal's shell: what started that shell (a terminal emulator,
        tmux, sshd) starts other terminals too, a person's among them."""
        hosts: list[Process] = []
        current = parent
        while current is not None and not self.keeper(current):
            if len(hosts) >= self._limit:
                return tuple(hosts), True
            fields = _stat(current)
            hosts.append(Process(current, _field(fields, _STARTED)))
            if not self._session or _field(fields, _SESSION) != self._session:
                break
            if current == self._session and self._terminal:
                break
            current = _field(fields, _PARENT)
        return tuple(hosts), False


def tcp_kin(sock: trio.socket.SocketType, until: float) -> AgentKin:
    """The agent that holds the other end of the TCP connection ``sock``: every
    process that holds it, as far as /proc is read by ``until`` (``time.monotonic``).
    It blocks while it reads /proc."""
    try:
        held = tcp_holder(sock)
    except HolderUnknown:
        return unknown_kin("the kernel did not say which user holds its TCP connection", None)
    try:
        found = _read_holders(held, kin_of, until)
    except TimeoutError:
        return unknown_kin("looking for it in /proc took too long", held.uid)
    if not found:
        why = f"no process of uid {held.uid} that mcpd can read holds its TCP connection"
        return unknown_kin(why, held.uid)
    return AgentKin(
        agents=tuple(p for k in found for p in k.agents),
        hosts=tuple(p for k in found for p in k.hosts),
        sessions=frozenset(s for k in found for s in k.sessions),
        owned=frozenset(s for k in found for s in k.owned),
        uid=held.uid,
        unread=any(k.unread for k in found),
        program=found[0].program if len(found) == 1 else None,
        command=found[0].command if len(found) == 1 else None,
    )


def tcp_deciders(sock: trio.socket.SocketType, until: float) -> tuple[Decider, ...]:
    """Each process that holds the other end of the TCP connection ``sock``, as a
    decider; none where they cannot be found by ``until`` (``time.monotonic``). It
    blocks while it reads /proc."""
    try:
        held = tcp_holder(sock)
        return tuple(_read_holders(held, decider_of, until))
    except (HolderUnknown, TimeoutError):
        return ()


def _read_holders(held: HeldSocket, read: Callable[[int], _T], until: float) -> list[_T]:
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
