"""What a server asks mcpd when no single agent's request is behind it."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcpd.servers.askback import AskRoutes
from protocol import jsonrpc as rpc


class Agent:
    direct = True

    def __init__(self) -> None:
        self.owner = object()

    async def ask(self, method: str, params: Any) -> Any:
        raise AssertionError("nobody should be asked")


async def refused(routes: AskRoutes) -> str:
    with pytest.raises(rpc.RPCError) as caught:
        await routes.answer(rpc.Request(7, "roots/list", None))
    return caught.value.message


async def test_a_server_asking_with_nobody_to_ask_is_refused_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="mcpd.askback")
    routes = AskRoutes("files", lambda: 5.0)
    # Many servers ask for roots as they start: refused, logged below INFO.
    assert "no agent has a request in flight" in await refused(routes)
    (record,) = caplog.records
    assert record.levelno == logging.DEBUG and "refused its roots/list" in record.getMessage()
    # Two agents' requests at once: mcpd cannot tell whose it is, and says so at INFO.
    caplog.clear()
    routes.enter(Agent())
    routes.enter(Agent())
    assert "several agents" in await refused(routes)
    (record,) = caplog.records
    assert record.levelno == logging.INFO
