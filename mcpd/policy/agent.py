"""Who an agent is, as the kernel says (SO_PEERCRED) and as mcpd knows it (its
profile, its connection, the protocol era it speaks): what approvals show, rate
limits count by, and the audit log records."""

from __future__ import annotations

import os
from typing import Final

import msgspec

from ..local.owners import user_name

_MAX_EXE: Final = 64


# Untracked by the cycle collector, as the records that carry it (never part of a cycle).
class AgentInfo(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    uid: int | None = None  # None: not known (an agent over TCP)
    pid: int | None = None
    exe: str | None = None  # the executable's name, from /proc/PID/exe
    profile: str = "default"
    connection: str = ""  # mcpd's id of the connection (or HTTP session)
    era: str = ""  # "modern" or "legacy"

    @property
    def key(self) -> str:
        """What tells this agent apart from others, for rates and the calls each may have
        waiting: its process; else its user (a process the kernel names no pid of, in
        another PID namespace); else the TCP endpoint, whose agents all hold the same
        token and are told apart by nothing a new connection cannot change."""
        if self.pid is not None:
            return f"pid:{self.pid}"
        if self.uid is not None:
            return f"uid:{self.uid}"
        return "endpoint"

    def label(self) -> str:
        """For people: ``pid 4242 (claude), uid 1000 (alice), profile default``."""
        parts = []
        if self.pid is not None:
            parts.append(f"pid {self.pid}" + (f" ({self.exe})" if self.exe else ""))
        if self.uid is not None:
            parts.append(f"uid {self.uid} ({user_name(self.uid)})")
        if not parts:
            parts.append(f"connection {self.connection or '?'}")
        parts.append(f"profile {self.profile}")
        return ", ".join(parts)


def exe_of(pid: int) -> str | None:
    """The name of the program ``pid`` runs (None when /proc does not say: the process
    is gone, or hidden as under systemd's ProtectProc=). Whoever runs the program chose
    the name: what could not be printed on a line of its own is replaced."""
    try:
        name = os.path.basename(os.readlink(f"/proc/{pid}/exe")).removesuffix(" (deleted)")
    except OSError:
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
                name = f.read().strip()
        except OSError:
            return None
    return "".join(c if c.isprintable() else "?" for c in name[:_MAX_EXE]) or None


def _stat_field(pid: int, index: int) -> int | None:
    """A number of /proc/PID/stat, counted from the state (0) after the name."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The name (field 2) is in parentheses and may hold anything, spaces included.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[index])
    except (IndexError, ValueError):
        return None


def parent_of(pid: int) -> int | None:
    return _stat_field(pid, 1)


def session_of(pid: int) -> int | None:
    """The session ``pid`` is in (a terminal's, or a service's), 0 or None if unknown."""
    return _stat_field(pid, 3)


class Decider(msgspec.Struct, frozen=True):
    """Who decides a call waiting for approval, as /proc told when they asked: their
    process and those it descends from, and their session."""

    lineage: tuple[int, ...] = ()
    session: int | None = None

    def excluded(self, asker: int) -> str | None:
        """Why this decider may not decide a call of the process ``asker``, if so: it
        is that process or one it started, or in the same session (a tool the agent's
        host started beside the agent, in the terminal the host runs in)."""
        if asker in self.lineage:
            return "the agent that made this call (or a process it started) cannot decide it"
        if self.session and self.session == session_of(asker):
            return (
                "a process in the same session as the agent that made this call (a tool "
                "its host started, the terminal it runs in) cannot decide it"
            )
        return None


def decider_of(pid: int, limit: int = 64) -> Decider:
    lineage: list[int] = []
    current: int | None = pid
    while current is not None and current > 1 and len(lineage) < limit:
        lineage.append(current)
        current = parent_of(current)
    return Decider(tuple(lineage), session_of(pid))
