"""Progress notifications, routed from a server back to the one agent that asked.

Each call that carries an agent's ``progressToken`` gets a token of mcpd's own for the
server, so two agents using the same token can never see each other's progress. Each
report also tells the call's scheduler, which may push the call's deadline out.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import msgspec

from protocol import jsonrpc as rpc
from protocol import mcp

Deliver = Callable[[mcp.ProgressParams], None]


class _Route:
    __slots__ = ("agent_token", "deliver", "extend")

    def __init__(
        self, agent_token: str | int, deliver: Deliver, extend: Callable[[], None]
    ) -> None:
        self.agent_token = agent_token
        self.deliver = deliver
        self.extend = extend


class ProgressRoutes:
    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._routes: dict[str, _Route] = {}
        self._ids = itertools.count(1)

    def open(self, agent_token: str | int, deliver: Deliver, extend: Callable[[], None]) -> str:
        """A token for the server; ``extend`` is called on each progress report."""
        token = f"{self._prefix}{next(self._ids)}"
        self._routes[token] = _Route(agent_token, deliver, extend)
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
        route.extend()
        route.deliver(msgspec.structs.replace(params, progressToken=route.agent_token))
        return True
