"""The requests mcpd sends a legacy agent on a server's behalf (``AgentRequests``):
matched with the agent's answers by mcpd's own ids, and failed at once when they never
reached the agent."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd.agents.askback.askers import AgentRequests
from mcpd.servers.asking.askback import NO_ANSWER
from protocol.jsonrpc import messages as rpc


class Outbox:
    """What mcpd wrote to the agent; ``room``: whether a line still fits."""

    def __init__(self, room: bool = True) -> None:
        self.room = room
        self.lines: list[dict[str, object]] = []

    def __call__(self, line: bytes) -> bool:
        if self.room:
            self.lines.append(json.loads(line))
        return self.room


async def test_the_agents_answer_reaches_the_request_by_mcpds_id() -> None:
    requests = AgentRequests()
    out = Outbox()
    got: list[Raw] = []
    async with trio.open_nursery() as nursery:

        async def ask() -> None:
            got.append(await requests.request("roots/list", None, out))

        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        (sent,) = out.lines
        assert sent["method"] == "roots/list"
        assert isinstance(sent["id"], str)
        assert requests.route(rpc.Response(sent["id"], Raw(b'{"roots":[]}')))
    assert got == [Raw(b'{"roots":[]}')]


async def test_a_request_that_could_not_be_sent_fails_at_once_and_waits_for_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    requests = AgentRequests()
    out = Outbox(room=False)  # an agent that stopped reading what mcpd writes
    with trio.fail_after(3600), pytest.raises(rpc.RPCError) as caught:
        await requests.request("elicitation/create", {"message": "q"}, out)
    assert caught.value.code == NO_ANSWER
    assert "could not be sent to the agent" in caught.value.message
    # Nothing waits under its id: an answer that names it is nobody's.
    assert not requests.route(rpc.Response("mcpd-1", Raw(b"{}")))
    # Once the agent reads again, the next request reaches it.
    out.room = True
    async with trio.open_nursery() as nursery:
        nursery.start_soon(requests.request, "roots/list", None, out)
        await trio.testing.wait_all_tasks_blocked()
        (sent,) = out.lines
        assert requests.route(rpc.Response(sent["id"], Raw(b"{}")))
