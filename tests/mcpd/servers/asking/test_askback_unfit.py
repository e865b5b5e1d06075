"""What a server asks that lacks what its method requires (params that are not an
object, or none, an elicitation without its message or form, a URL-mode one without
its URL, a sample without its messages) is refused as malformed: no agent of either
era is shown it as an empty form, the agent that called gets a result naming the server
and what was wrong, and the journal a line."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec import Raw

from mcpd.servers.asking.askback import AskRoutes
from protocol.jsonrpc import messages as rpc
from tests.support.clients.agent import META, make_config, running
from tests.support.clients.answering import connect_answering
from tests.support.system.procs import scripted

LIMIT = 60
UNFIT = [
    ('"notadict"', "params are not an object"),
    ("null", "params are missing"),
    ('{"mode": "form", "message": "GitHub user?"}', "params have no requestedSchema"),
    ('{"message": 7, "requestedSchema": {}}', "message is not a string"),
    ('{"mode": "url", "message": "Log in", "elicitationId": "e1"}', "params have no url"),
    ('{"mode": "sideways", "message": "?"}', "mode is neither 'form' nor 'url'"),
]
FORM = {"elicitation": {}}


@pytest.mark.parametrize("modern", [True, False], ids=["modern-agent", "legacy-agent"])
@pytest.mark.parametrize(("given", "why"), UNFIT)
async def test_an_input_request_unfit_to_show_ends_the_call_naming_the_server_and_the_flaw(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, modern: bool, given: str, why: str
) -> None:
    caplog.set_level(logging.WARNING, logger="mcpd.askback")
    command, args = scripted("--era", "modern", "--names", "ask", "--ask-params", given)
    config = make_config(tmp_path, {"s": {"command": command, "args": list(args)}})
    with trio.fail_after(LIMIT):
        async with (
            running(config) as daemon,
            connect_answering(
                daemon.socket_path, modern, lambda m, p: {"action": "accept"}
            ) as agent,
        ):
            if modern:
                caps = {"_meta": {**META, "io.modelcontextprotocol/clientCapabilities": FORM}}
                result = await agent.result("tools/call", {"name": "mcp__s__ask", **caps})
            else:
                await agent.initialize_with(FORM)
                result = await agent.call("mcp__s__ask")
    assert agent.asked == []  # not as an empty form, nor any other way
    assert result["isError"] is True
    assert result.get("resultType", "complete") == "complete"
    said = result["content"][0]["text"]
    assert "The tool server 's' sent a malformed reply" in said
    assert f'request "login" (elicitation/create), whose {why}' in said
    [line] = [r.getMessage() for r in caplog.records if "no agent is asked it" in r.getMessage()]
    assert line.startswith("s: its input_required result holds") and why in line


def _raw(params: object) -> Raw | None:
    if params is None:
        return None
    return Raw(params.encode() if isinstance(params, str) else json.dumps(params).encode())


class _Agent:
    direct = True

    def __init__(self) -> None:
        self.owner = object()
        self.asked: list[tuple[str, object]] = []

    async def ask(self, method: str, params: Any) -> Any:
        self.asked.append((method, params))
        return {"action": "accept"}


@pytest.mark.parametrize(
    ("method", "params", "why"),
    [
        ("elicitation/create", '"notadict"', "params are not an object"),
        ("elicitation/create", None, "params are missing"),
        ("elicitation/create", '{"message": "Who?"}', "params have no requestedSchema"),
        ("sampling/createMessage", '{"messages": []}', "params have no maxTokens"),
        ("sampling/createMessage", '{"messages": {}, "maxTokens": 5}', "messages is not an array"),
    ],
)
async def test_a_legacy_servers_own_request_unfit_to_show_is_refused_and_reaches_no_agent(
    caplog: pytest.LogCaptureFixture, method: str, params: str | None, why: str
) -> None:
    caplog.set_level(logging.WARNING, logger="mcpd.askback")
    routes = AskRoutes("files", lambda: 5.0)
    agent = _Agent()
    routes.enter(agent)
    with pytest.raises(rpc.RPCError) as caught:
        await routes.answer(rpc.Request(7, method, _raw(params)))
    assert agent.asked == []
    assert caught.value.code == rpc.INVALID_PARAMS and why in caught.value.message
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"files: it sent a request for {method} whose {why}")


async def test_a_legacy_servers_well_formed_request_still_reaches_its_agent() -> None:
    routes = AskRoutes("files", lambda: 5.0)
    agent = _Agent()
    routes.enter(agent)
    for method, params in (
        ("roots/list", None),
        ("elicitation/create", {"message": "Who?", "requestedSchema": {}}),
        ("sampling/createMessage", {"messages": [], "maxTokens": 5}),
    ):
        await routes.answer(rpc.Request(7, method, _raw(params)))
    assert [m for m, _ in agent.asked] == [
        "roots/list",
        "elicitation/create",
        "sampling/createMessage",
    ]
