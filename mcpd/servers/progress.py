"""Progress notifications, routed from a server back to the one agent that asked.

Each call that carries an agent's ``progressToken`` gets a token of mcpd's own for the
server, so two agents using the same token can never see each other's progress. Each
report also tells the call's scheduler, which may push the call's deadline out.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TypeAlias

import msgspec

from protocol import jsonrpc as rpc
from protocol import mcp

from .askback import Cause

# Where the server's progress reports for a call go (its agent).
ProgressSink: TypeAlias = Callable[[mcp.ProgressParams], None]


class ProgressRoutes:
    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        # By mcpd's token: the agent's token, where its reports go, and the call.
        self._routes: dict[str, tuple[str | int, ProgressSink, Cause]] = {}
        self._ids = itertools.count(1)

    def open(self, agent_token: str | int, deliver: ProgressSink, call: Cause) -> str:
        """A token for the server; each report also gives ``call`` its time again."""
        token = f"{self._prefix}{next(self._ids)}"
        self._routes[token] = (agent_token, deliver, call)
        return token

    def close(self, token: str) -> None:
        self._routes.pop(token, None)

    def handle(self, msg: rpc.Notification) -> bool:
        """Deliver a ``notifications/progress``; False if it belongs to no open call."""
        try:
            params = rpc.decode_as(msg.params, mcp.ProgressParams)
        except rpc.InvalidParams:
            return False
        route = self._routes.get(params.progressToken)  # type: ignore[arg-type]
        if route is None:
            return False
        agent_token, deliver, call = route
        # The server is working on it: more time, within the call's hard limit.
        call.extend(call.timeout)
        deliver(msgspec.structs.replace(params, progressToken=agent_token))
        return True
