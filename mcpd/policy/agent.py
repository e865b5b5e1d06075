"""Who an agent is, as the kernel says (SO_PEERCRED) and as mcpd knows it (its
profile, its connection, the protocol era it speaks): what approvals show, rate
limits count by, and the audit log records."""

from __future__ import annotations

import os
from typing import Final

import msgspec

from ..local.ownership.owners import user_name

_MAX_EXE: Final = 64


def agent_key(pid: int | None, uid: int | None) -> str:
    """What tells an agent apart from others, for rates and the calls each may have
    waiting: its process; else its user (a process the kernel names no pid of, in
    another PID namespace, or that holds a TCP connection to the endpoint where mcpd
    cannot look); else the TCP endpoint, whose clients it cannot name all hold the
    same token and are told apart by nothing a new connection cannot change."""
    if pid is not None:
        return f"pid:{pid}"
    if uid is not None:
        return f"uid:{uid}"
    return "endpoint"


# Untracked by the cycle collector, as the records that carry it (never part of a cycle).
class AgentInfo(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    uid: int | None = None  # None: not known (an agent on another machine, over TCP)
    pid: int | None = None
    exe: str | None = None  # the executable's name, from /proc/PID/exe
    profile: str = "default"
    connection: str = ""  # mcpd's id of the connection (or HTTP session)
    era: str = ""  # "modern" or "legacy"

    @property
    def key(self) -> str:
        return agent_key(self.pid, self.uid)

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
