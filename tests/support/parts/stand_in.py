"""A transport played by a test: what a server's session uses of one, each request
answered by ``answer`` (a result, an exception to raise, or ``Never``), the methods
sent kept in order. Subclasses say what their server answers and add what they need."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import trio
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.pacing.read_budget import HeldBack
from transports.base import Started
from transports.errors import TransportClosed


class Never:
    """An answer that never comes."""


class StandIn:
    def __init__(self) -> None:
        self.sent: list[str] = []
        self.era: str | None = None
        self.closed = trio.Event()
        self.error: TransportClosed | None = None
        self.auth = None
        self.on_request = None
        self.started: Started | None = None
        self.pid: int | None = None
        self.held_back: HeldBack | None = None
        self.read_work = 0.0

    def answer(self, method: str, params: Any) -> Any:
        """What the server answers ``method`` with; by default, that it has no such method."""
        return rpc.RPCError(rpc.METHOD_NOT_FOUND, "Method not found")

    async def request(
        self,
        method: str,
        params: Any,
        *,
        headers: Mapping[str, str] | None = None,
        cancellable: bool = True,
    ) -> Raw:
        self.sent.append(method)
        answer = self.answer(method, params)
        if isinstance(answer, Never):
            await trio.sleep_forever()
        if isinstance(answer, Exception):
            raise answer
        return Raw(json.dumps(answer).encode())

    async def notify(
        self, method: str, params: Any, *, headers: Mapping[str, str] | None = None
    ) -> None:
        self.sent.append(method)

    def send(
        self, method: str, params: Any, reply: Any, *, headers: Mapping[str, str] | None = None
    ) -> rpc.Id:
        raise TransportClosed(f"a played transport sends no {method} without waiting")

    def forget(self, rid: rpc.Id, reason: str) -> None:
        pass

    def reset_session(self) -> None:
        pass

    async def listen(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()

    def stderr_tail(self) -> list[str]:
        return []
