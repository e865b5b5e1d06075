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
    __slots__ = ("_legacy", "_modern", "connection", "peer")

    def __init__(self, peer: Peer | None) -> None:
        self.peer = peer
        self.connection = new_connection_id()
        # The agent as its calls of each era are recorded, in the profile of the last.
        self._legacy: AgentInfo | None = None
        self._modern: AgentInfo | None = None

    def info(self, profile: str, modern: bool) -> AgentInfo:
        """The agent as one call of it, in ``profile`` and its era, is recorded."""
        info = self._modern if modern else self._legacy
        if info is None or info.profile != profile:
            info = self._made(profile, modern)
        return info

    def _made(self, profile: str, modern: bool) -> AgentInfo:
        peer = self.peer
        known = self._legacy or self._modern
        if known is not None:
            exe = known.exe
        else:
            exe = exe_of(peer.pid) if peer is not None and peer.pid > 0 else None
        info = AgentInfo(
            uid=None if peer is None else peer.uid,
            pid=None if peer is None or peer.pid <= 0 else peer.pid,
            exe=exe,
            profile=profile,
            connection=self.connection,
            era="modern" if modern else "legacy",
        )
        if modern:
            self._modern = info
        else:
            self._legacy = info
        return info
