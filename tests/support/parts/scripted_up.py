"""An upstream session that answers from a script, for the tests of what lists a
server's prompts, resources and templates (``servers.lists.list_pages``) and of what keeps
them (``servers.lists.prompt_resource_lists``): each request answered by its method's entry,
every request kept."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import msgspec
import trio
from msgspec import Raw

from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.registry.gating.limits import DEFAULT_LIMITS
from mcpd.servers.calling.outgoing_meta import CallMeta
from mcpd.servers.connected.upstream import Upstream
from protocol.jsonrpc import messages as rpc
from protocol.mcp.greeting import Declared, server_capabilities


class Never:
    """An answer that never comes."""


Answer = dict[str, Any] | list[Any] | Exception | Callable[[Any], Any] | Never


class ScriptedUp:
    """What the keeper uses of an upstream: each request answered by ``answers[method]``
    (a result, an error to raise, or a function of the params), every request kept."""

    def __init__(self, capabilities: dict[str, Any], era: str = "legacy") -> None:
        self.alias = "srv"
        self.guard = SecretGuard(KnownSecrets())  # holding none, unless a test gives it some
        self.capabilities = server_capabilities(
            msgspec.json.decode(json.dumps(capabilities), type=Declared)
        )
        self.era = era
        self.max_pages = 1000
        self.limits = DEFAULT_LIMITS
        self.meta = CallMeta()
        self.answers: dict[str, Answer] = {}
        self.sent: list[tuple[str, Any]] = []
        self.listens: list[dict[str, Any]] = []
        self.listening = trio.Event()
        self.end_listen = trio.Event()
        self.listen_error: Exception | None = None
        self.heard_on_listen: list[rpc.Notification] = []  # before its answer
        self.notify: Callable[[rpc.Notification], None] = lambda msg: None

    @property
    def lists_changes(self) -> bool:
        return self.capabilities.tools_changed

    async def request(self, method: str, params: Any) -> Raw:
        self.sent.append((method, params))
        answer = self.answers[method]
        if isinstance(answer, Never):
            await trio.sleep_forever()
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            answer = answer(params)
        return Raw(json.dumps(answer, ensure_ascii=False).encode())

    async def listen_for(self, notifications: dict[str, Any]) -> None:
        self.listens.append(dict(notifications))
        self.listening.set()
        for msg in self.heard_on_listen:
            self.notify(msg)
        if self.listen_error is not None:
            raise self.listen_error
        await self.end_listen.wait()
        self.end_listen = trio.Event()

    def methods(self) -> list[str]:
        return [m for m, _ in self.sent]


def as_up(up: ScriptedUp) -> Upstream:
    return cast(Upstream, up)


def paged(field: str, pages: list[list[Any]]) -> Callable[[Any], Any]:
    """A list method answering page ``n`` at cursor ``"n"``."""

    def answer(params: Any) -> Any:
        cursor = getattr(params, "cursor", None)
        n = int(cursor) if isinstance(cursor, str) else 0
        page: dict[str, Any] = {field: pages[n]}
        if n + 1 < len(pages):
            page["nextCursor"] = str(n + 1)
        return page

    return answer
