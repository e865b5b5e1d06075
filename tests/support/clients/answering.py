"""A test agent that also answers what mcpd asks it (a legacy agent's
``elicitation/create``, ``sampling/createMessage``, ``roots/list``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio

from tests.support.clients.agent import Agent

Answer = Callable[[str, Any], Any]  # (method, params) -> result, or raise AskError


class AskError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class AnsweringAgent(Agent):
    def __init__(self, stream: trio.SocketStream, modern: bool, answer: Answer | None) -> None:
        super().__init__(stream, modern)
        self.answer = answer
        self.asked: list[dict[str, Any]] = []
        self.asked_event = trio.Event()
        self.hold = False  # when set, requests are recorded and left unanswered
        self.nursery: trio.Nursery | None = None

    def _route(self, msg: dict[str, Any]) -> None:
        if "method" in msg and "id" in msg:
            self.asked.append(msg)
            self.asked_event.set()
            if not self.hold:
                self._reply(msg)
            return
        super()._route(msg)

    def answer_held(self, msg: dict[str, Any]) -> None:
        """Answer a request that came while ``hold`` was set, as if it had not been."""
        self._reply(msg)

    def _reply(self, msg: dict[str, Any]) -> None:
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": msg["id"]}
        try:
            if self.answer is None:
                raise AskError(-32601, "no")
            body["result"] = self.answer(msg["method"], msg.get("params"))
        except AskError as exc:
            body["error"] = {"code": exc.code, "message": exc.message}
        assert self.nursery is not None
        self.nursery.start_soon(self._send_quietly, json.dumps(body).encode() + b"\n")

    async def _send_quietly(self, data: bytes) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.send_raw(data)

    async def wait_asked(self, count: int) -> list[dict[str, Any]]:
        while len(self.asked) < count:
            self.asked_event = trio.Event()
            await self.asked_event.wait()
        return self.asked

    async def initialize_with(self, capabilities: dict[str, Any]) -> dict[str, Any]:
        result = await self.result(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "legacy-agent", "version": "0"},
            },
        )
        await self.send_raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        return result  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def connect_answering(
    path: str, modern: bool = True, answer: Answer | None = None
) -> AsyncIterator[AnsweringAgent]:
    stream = await trio.open_unix_socket(path)
    agent = AnsweringAgent(stream, modern, answer)
    async with trio.open_nursery() as nursery:
        agent.nursery = nursery
        nursery.start_soon(agent.reader)
        try:
            yield agent
        finally:
            await stream.aclose()
            nursery.cancel_scope.cancel()
