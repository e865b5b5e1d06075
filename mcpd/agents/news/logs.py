"""Servers' log messages, for the agents that asked for them.

A legacy agent asks with ``logging/setLevel``: from then on it gets, from every server
its profile shows, each ``notifications/message`` at that level or a more severe one.
An agent that never asked gets none. ``logger`` says which server spoke: the server's
alias, or ``alias/logger`` when the server named a logger of its own; ``data`` is
the server's, cleaned (``servers.connected.log_messages``). Each server is asked for the most
verbose level any agent that sees it wants (``AllServers.want_logs``).

Those messages belong to no agent's request: a server several agents share logs there
what it does for any of them, often with the arguments it was called with. So only
agents that read as the daemon's own user, and not on a profile's own socket
(``AgentIdentity.reads_shared_output``, as for a server's stderr) get them; another
agent is answered and its level kept, but it is sent none and its level is not among
those a server is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from protocol.jsonrpc import messages as rpc
from protocol.mcp import server_logs
from protocol.mcp.server_logs import LogMessage

from ...servers.all_servers import AllServers
from ...servers.shared import AgentKey

Send = Callable[[bytes], None]
SeesServer = Callable[[str], bool]


def _every_server(alias: str) -> bool:
    return True


@dataclass
class _Asked:
    rank: int
    send: Send
    sees: SeesServer
    own_user: bool  # whether it may read what the server logged for anyone

    def hears(self, alias: str) -> bool:
        return self.own_user and self.sees(alias)


class AgentLogs:
    def __init__(self, servers: AllServers) -> None:
        self._servers = servers
        self._agents: dict[int, _Asked] = {}  # by id of the agent (its owner object)
        servers.on_log_message(self.heard)

    def set_level(
        self,
        owner: AgentKey,
        level: str,
        send: Send,
        sees: SeesServer = _every_server,
        *,
        own_user: bool,
    ) -> None:
        """``own_user``: the agent reads what servers write for everyone
        (``AgentIdentity.reads_shared_output``)."""
        rank = server_logs.rank(level)
        assert rank is not None, "checked by the caller"
        self._agents[id(owner)] = _Asked(rank, send, sees, own_user)
        self._servers.want_logs(self.level_for)

    def owner_gone(self, owner: AgentKey) -> None:
        if self._agents.pop(id(owner), None) is not None:
            self._servers.want_logs(self.level_for)

    def level_for(self, alias: str) -> str | None:
        """The most verbose level an agent that sees ``alias`` wants (None: none)."""
        ranks = [a.rank for a in self._agents.values() if a.hears(alias)]
        return server_logs.LEVELS[min(ranks)] if ranks else None

    def heard(self, alias: str, message: LogMessage) -> None:
        severity = server_logs.rank(message.level)
        if severity is None:
            return
        line: bytes | None = None
        for asked in list(self._agents.values()):
            if severity < asked.rank or not asked.hears(alias):
                continue
            if line is None:
                line = rpc.encode_notification(
                    "notifications/message", as_agents_see(alias, message)
                )
            asked.send(line)  # a slow agent's queue is bounded: it misses some


def as_agents_see(alias: str, message: LogMessage) -> LogMessage:
    """The message with ``logger`` naming its server; the server's ``_meta`` (its
    subscription or request tags) means nothing to an agent."""
    name = alias if not message.logger else f"{alias}/{message.logger}"
    return LogMessage(level=message.level, data=message.data, logger=name)
