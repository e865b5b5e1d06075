"""Who one agent connection is, for the policy and the audit log: the kernel's word on
its process (SO_PEERCRED), the program it runs, and an id of mcpd's own for the
connection (or HTTP session), which remembered approvals are kept under.

The program's name is read from /proc once, at the connection's first call; the
profile and era come with each call, since an agent may change profile
(``mcpd/useProfile``) and a connection may carry requests of either era.
"""

from __future__ import annotations

import secrets

from ..policy.agent import AgentInfo, exe_of
from .peers import Peer


def new_connection_id() -> str:
    return secrets.token_hex(4)


class Identity:
    __slots__ = ("_exe", "_info", "connection", "peer")

    def __init__(self, peer: Peer | None) -> None:
        self.peer = peer
        self.connection = new_connection_id()
        self._info: AgentInfo | None = None

    def info(self, profile: str, modern: bool) -> AgentInfo:
        """The agent as one call of it, in ``profile`` and its era, is recorded."""
        era = "modern" if modern else "legacy"
        info = self._info
        if info is not None and info.profile == profile and info.era == era:
            return info
        peer = self.peer
        if info is not None:
            exe = info.exe
        else:
            exe = exe_of(peer.pid) if peer is not None and peer.pid > 0 else None
        info = self._info = AgentInfo(
            uid=None if peer is None else peer.uid,
            pid=None if peer is None or peer.pid <= 0 else peer.pid,
            exe=exe,
            profile=profile,
            connection=self.connection,
            era=era,
        )
        return info
