"""Who an agent is, as the kernel says (SO_PEERCRED) and as mcpd knows it (its
profile, its connection, the protocol era it speaks): what approvals show, rate
limits count by, and the audit log records."""

from __future__ import annotations

import functools
import os
import pwd
from typing import Final

import msgspec

_MAX_EXE: Final = 64


class AgentInfo(msgspec.Struct, frozen=True, kw_only=True):
    uid: int | None = None  # None: not known (an agent over TCP)
    pid: int | None = None
    exe: str | None = None  # the executable's name, from /proc/PID/exe
    profile: str = "default"
    connection: str = ""  # mcpd's id of the connection (or HTTP session)
    era: str = ""  # "modern" or "legacy"

    @property
    def key(self) -> str:
        """What tells this agent apart from others: its process, else its connection."""
        return f"pid:{self.pid}" if self.pid is not None else f"conn:{self.connection}"

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


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The name (field 2) is in parentheses and may hold anything, spaces included.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def descends_from(pid: int, ancestor: int, limit: int = 64) -> bool:
    """Whether ``pid`` is ``ancestor`` or one of the processes it started (directly or
    not), as far as /proc tells."""
    seen = 0
    current: int | None = pid
    while current is not None and current > 1 and seen < limit:
        if current == ancestor:
            return True
        current = parent_of(current)
        seen += 1
    return False


@functools.lru_cache(maxsize=256)
def user_name(uid: int) -> str:
    # Cached: a record of every call names its agent's user, and a lookup may read
    # /etc/passwd or ask a directory service.
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "no user name"
