"""A call's reply (``Router.reply``): its result shaped as ``results.shaped_for``
shapes it, which the reply writes out for every call rather than call it."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from msgspec import Raw

from mcpd.agents.agent import AgentCall
from mcpd.agents.calls.results import shaped_for
from protocol.jsonrpc import splice
from protocol.mcp import core as mcp
from tests.support.clients.agent import META
from tests.support.parts.routing import StandInAgent, World

BUDGET = 120
RESULTS = [
    b'{"content":[{"type":"text","text":"hi"}]}',
    b'{"content":[{"type":"text","text":"' + b"long " * 60 + b'"}],"isError":false}',
    b'{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}],"isError":true}',
    b'{"content":[{"type":"text","text":"a"},{"type":"audio","data":"AA==","mimeType":"a/b"}]}',
    b'{"content":[],"structuredContent":{"a":[1,2]},"resultType":"complete"}',
    b'{"content":[{"type":"text","text":"' + b"t" * 200 + b'"}],"structuredContent":{"b":1}}',
    b'{"resultType":"input_required","requestState":"s"}',
    b'{"resultType":"no-such-kind","content":[]}',
    b'{"content":"not a list"}',
    b'  {"content":[{"type":"text","text":"spaced"}]}',
    b"{}",
    b"[1]",
    b'{"resultType":"task","taskId":"t1","status":"working"}',
    b'{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create",'
    b'"params":{"message":"ok?","requestedSchema":{"type":"object","properties":{}}}}}}',
    b'{"content":[{"type":"resource_link","uri":"file:///a","name":"a"}]}',
]


# What the agent declared: none (a legacy agent), nothing, or that it answers forms.
AGENTS = {"legacy": None, "modern": {}, "modern-elicits": {"elicitation": {"form": {}}}}


def started(world: World, declared: dict[str, Any] | None, tasks: bool) -> AgentCall:
    caller = StandInAgent(world.profile, legacy=declared is None)
    params: dict[str, Any] = {"name": world.local("git", "status"), "arguments": {}}
    if declared is not None:
        params["_meta"] = {**META, "io.modelcontextprotocol/clientCapabilities": declared}
    line = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    request = splice.decode_call(json.dumps(line).encode())
    assert request is not None
    call = world.router.call_of(caller, request)
    world.router.start(call)
    call.tasks = tasks
    return call


def head_of(raw: bytes) -> mcp.CallToolResultKinds | None:
    """The head a server's scheduler reads of a result, when it reads one."""
    try:
        return msgspec.json.decode(raw, type=mcp.CallToolResultKinds)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


class Finishing:
    """Where a reply's shaped result is finished, kept as it was handed over."""

    def __init__(self) -> None:
        self.links: list[bool] = []

    def finish(
        self, to: object, result: Any, links: bool, sent: object = None, whose: object = None
    ) -> Any:
        self.links.append(links)
        return result


@pytest.mark.parametrize("raw", RESULTS)
@pytest.mark.parametrize("agent", list(AGENTS))
@pytest.mark.parametrize("tasks", [False, True], ids=["", "tasks"])
@pytest.mark.parametrize("read", [False, True], ids=["unread", "head-read"])
def test_a_reply_holds_the_result_as_shaped_for_its_call(
    raw: bytes, agent: str, tasks: bool, read: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = World()
    router = world.router
    router.budget = BUDGET
    call = started(world, AGENTS[agent], tasks)
    shaped, links, failed = shaped_for(Raw(raw), call, BUDGET)
    # What comes after the shape (links handed over, a task named, what a server asked
    # handed on with mcpd's state) is the same either way, and left out here.
    finishing = router.tasks = Finishing()  # type: ignore[assignment]
    monkeypatch.setattr(router.resumes, "hand_on", lambda shaped, *rest: (shaped, failed))
    if read:
        call.out.head = head_of(raw)
    line, _ = router.reply(call, Raw(raw))
    expected = bytes(shaped) if isinstance(shaped, Raw) else msgspec.json.encode(shaped)
    assert json.loads(line)["result"] == json.loads(expected)
    assert finishing.links == ([links] if links or tasks else [])
    [record] = world.audit.records
    assert record.outcome == ("tool_error" if failed else "ok")
