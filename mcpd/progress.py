"""Progress notifications, routed from a server back to the one agent that asked.

Each call that carries an agent's ``progressToken`` gets a token of mcpd's own for the
server, so two agents using the same token can never see each other's progress. A
progress notification may also push the call's deadline out, up to a hard limit.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import msgspec
import trio

from protocol import jsonrpc as rpc
from protocol import mcp

Deliver = Callable[[mcp.ProgressParams], None]


class _Route:
    __slots__ = ("agent_token", "deliver", "limit", "scope", "timeout")

    def __init__(
        self,
        agent_token: str | int,
        deliver: Deliver,
        scope: trio.CancelScope,
        timeout: float,
        limit: float,
    ) -> None:
        self.agent_token = agent_token
        self.deliver = deliver
        self.scope = scope
        self.timeout = timeout
        self.limit = limit


class ProgressRoutes:
    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._routes: dict[str, _Route] = {}
        self._ids = itertools.count(1)

    def open(
        self,
        agent_token: str | int,
        deliver: Deliver,
        scope: trio.CancelScope,
        timeout: float,
        limit: float,
    ) -> str:
        token = f"{self._prefix}{next(self._ids)}"
        self._routes[token] = _Route(agent_token, deliver, scope, timeout, limit)
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
        # The server is working on it: give the call more time, within the hard limit.
        route.scope.deadline = min(trio.current_time() + route.timeout, route.limit)
        route.deliver(msgspec.structs.replace(params, progressToken=route.agent_token))
        return True
