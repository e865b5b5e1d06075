"""A call that waited for approval, looked at again once its wait is over, in a running
daemon with agents on its socket: a tool its server changed meanwhile (held until a
person approves it anew) is refused when the operator approves the call, and when a
modern agent's retry brings its user's approval with the requestState mcpd gave before
the change; a reload that denies a waiting call ends it at once (the agent's user is
told to stop asking, and ``mcpd approvals`` lists it no more), while one that allows
it sends it once when approved. An approval remembered for a tool does not outlast
its definition. A call let through that waits for a free slot at its
server is looked at again too: a reload that denies it, or its tool held meanwhile,
ends it at once, unsent. None of these reach the server, and each audit record says
what became of the call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
import trio.testing

from tests.support.clients.agent import META, Agent, connect
from tests.support.clients.answering import connect_answering
from tests.support.daemons.pins import TOOLS_CHANGED, cli, heard
from tests.support.daemons.policy import text
from tests.support.daemons.waiting import ASK, CREATE, LIMIT, SEARCH, Waiting, waiting_daemon

ASKS = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
APPROVE = {"action": "accept", "content": {"decision": "approve"}}
CHANGED = "but the tool changed while the call waited for approval: it is held"
HOLD = "mcp__tickets__hold"
DENY_SEARCH: list[dict[str, Any]] = [
    {"tools": ["tickets/search"], "action": "deny", "reason": "searches are off today"},
    *ASK,
]


async def test_a_tool_held_while_its_call_waits_is_not_called_once_the_operator_approves(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path) as setup:
            async with connect(setup.daemon.socket_path) as agent, trio.open_nursery() as nursery:
                got: list[dict[str, Any]] = []

                async def call() -> None:
                    got.append(await agent.call(SEARCH, {"query": "open bugs"}))

                nursery.start_soon(call)
                [waiting] = await setup.pending()
                await setup.change_tool()
                setup.daemon.approvals.decide(waiting.id, True, "uid 0 (root)")
            [result] = got
            assert result["isError"] is True and CHANGED in text(result)
            assert setup.reached("search") == 0
            assert await setup.approvals_listed() == []
            records = await setup.records()
            [record] = [r for r in records if r.name == SEARCH]
            assert (record.decision, record.decided_by, record.outcome) == (
                "approved",
                "uid 0 (root)",
                "refused",
            )
            assert record.reason is not None and "changed while the call waited" in record.reason


async def asked(agent: Agent, name: str) -> tuple[dict[str, Any], str, str]:
    """A modern agent's call to ``name`` that declares elicitation: its params, and of
    mcpd's input_required the key and the requestState."""
    params = {"name": name, "arguments": {"query": "a"}, "_meta": ASKS}
    first = (await agent.rpc("tools/call", params))["result"]
    assert first["resultType"] == "input_required"
    [key] = first["inputRequests"]
    return params, key, first["requestState"]


async def test_a_modern_agents_approval_after_the_tool_changed_carries_no_call_past_it(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path) as setup, connect(setup.daemon.socket_path) as agent:
            params, key, state = await asked(agent, SEARCH)
            await setup.pending()
            await setup.change_tool()
            again = {**params, "requestState": state, "inputResponses": {key: APPROVE}}
            result = (await agent.rpc("tools/call", again))["result"]
            assert result["isError"] is True and CHANGED in text(result)
            assert setup.daemon.approvals.list() == []
            assert setup.reached("search") == 0
            records = await setup.records()
            [record] = [r for r in records if r.name == SEARCH]
            assert (record.decision, record.outcome, record.agent.era) == (
                "approved",
                "refused",
                "modern",
            )


async def test_a_reload_that_denies_a_waiting_call_ends_it_at_once(tmp_path: Path) -> None:
    """The agent's user, still reading the question when the operator reloads rules
    that deny the call, is told to stop; an approval that comes anyway does nothing."""
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path) as setup:
            sock = setup.daemon.socket_path
            async with connect_answering(sock, False, lambda m, p: APPROVE) as agent:
                agent.hold = True  # the user takes their time
                await agent.initialize_with({"elicitation": {}})
                got: list[dict[str, Any]] = []
                async with trio.open_nursery() as nursery:

                    async def call() -> None:
                        got.append(await agent.call(SEARCH, {"query": "x"}))

                    nursery.start_soon(call)
                    [question] = await agent.wait_asked(1)
                    await setup.reload(DENY_SEARCH)
                    assert setup.daemon.approvals.list() == []
                    assert await setup.approvals_listed() == []
                [result] = got
                said = text(result)
                assert result["isError"] is True
                assert "policy changed while the call to 'mcp__tickets__search' waited" in said
                assert "searches are off today" in said
                cancelled = [
                    n["params"]["requestId"]
                    for n in agent.notifications
                    if n["method"] == "notifications/cancelled"
                ]
                assert cancelled == [question["id"]]
                agent.answer_held(question)
                direct = await agent.call(SEARCH, {"query": "y"})
                assert "does not allow calls" in text(direct)
            assert setup.reached("search") == 0
            records = await setup.records()
            decided = [(r.decision, r.decided_by, r.outcome) for r in records if r.name == SEARCH]
            assert decided == [("deny", "policy[0]", "refused")] * 2
            assert records[0].reason == (
                "denied by policy[0] (the rules changed while the call waited): "
                "searches are off today"
            )


async def test_a_modern_agents_approval_after_a_reload_denied_its_call_sends_nothing(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path) as setup, connect(setup.daemon.socket_path) as agent:
            params, key, state = await asked(agent, SEARCH)
            await setup.pending()
            await setup.reload(DENY_SEARCH)
            assert setup.daemon.approvals.list() == []
            again = {**params, "requestState": state, "inputResponses": {key: APPROVE}}
            reply = await agent.rpc("tools/call", again)
            # The wait it answers is over: it starts nothing.
            assert "requestState is mcpd's and has expired" in reply["error"]["message"]
            assert setup.reached("search") == 0
            records = await setup.records()
            assert [(r.decision, r.outcome) for r in records] == [
                ("deny", "refused"),
                ("none", "error"),
            ]


async def test_a_reload_that_allows_a_waiting_call_sends_it_once_approved(
    tmp_path: Path,
) -> None:
    allow = [{"tools": ["tickets/create"], "action": "allow"}, *ASK]
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path) as setup:
            async with connect(setup.daemon.socket_path) as agent, trio.open_nursery() as nursery:
                got: list[dict[str, Any]] = []

                async def call() -> None:
                    got.append(await agent.call(CREATE, {"query": "a ticket"}))

                nursery.start_soon(call)
                [waiting] = await setup.pending()
                await setup.reload(allow)
                # Still the person's to decide: the rules no longer forbid what they ask.
                assert [v.id for v in setup.daemon.approvals.list()] == [waiting.id]
                setup.daemon.approvals.decide(waiting.id, True, "uid 0 (root)")
            [result] = got
            assert result.get("isError") is not True, json.dumps(result)
            assert setup.reached("create") == 1
            records = await setup.records()
            assert [(r.decision, r.decided_by, r.outcome) for r in records] == [
                ("allow", "policy[0]", "ok")
            ]


async def test_an_approval_remembered_for_a_tool_is_asked_again_once_it_is_defined_anew(
    tmp_path: Path,
) -> None:
    """Approving a tool's new definition (``mcpd approve``) is not approving its calls:
    on the connection that had an approval remembered for the tool as it was, the next
    call waits for a person again."""
    remembers = [{"tools": ["tickets/search"], "action": "ask", "remember": "connection"}]
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path, remembers) as setup:
            sock = setup.daemon.socket_path
            async with connect(sock) as agent:

                async def approved_by_the_operator() -> None:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(agent.call, SEARCH, {"query": "a"})
                        [waiting] = await setup.pending()
                        setup.daemon.approvals.decide(waiting.id, True, "uid 0 (root)")

                await approved_by_the_operator()
                await agent.call(SEARCH, {"query": "b"})
                await setup.change_tool()
                code, _, err = await cli(sock, "approve", "tickets", "--yes")
                assert code == 0, err
                await approved_by_the_operator()
            assert setup.reached("search") == 3
            records = await setup.records()
            assert [(r.decision, r.decided_by) for r in records if r.name == SEARCH] == [
                ("approved", "uid 0 (root)"),
                ("approved", "remembered"),
                ("approved", "uid 0 (root)"),
            ]


# -- let through, but waiting for the server's one slot --


class Slot:
    """The server's one slot, taken by a call of ``hold`` that the server answers only
    when told; the calls made meanwhile wait behind it."""

    def __init__(self, setup: Waiting, agent: Agent, nursery: trio.Nursery) -> None:
        self.setup = setup
        self.agent = agent
        self.nursery = nursery
        self.got: dict[str, dict[str, Any]] = {}

    def call(self, name: str) -> None:
        async def call() -> None:
            self.got[name] = await self.agent.call(name, {"query": "x"})

        self.nursery.start_soon(call)

    async def queued(self) -> int:
        """Once the daemon has done what it can with what it was sent: how many calls
        wait for the slot."""
        await trio.testing.wait_all_tasks_blocked()
        scheduler = self.setup.daemon.supervisor.servers["tickets"].scheduler
        assert scheduler.running == 1
        return len(scheduler.queue)

    async def take(self) -> None:
        self.call(HOLD)
        assert await self.queued() == 0


async def test_a_reload_that_denies_an_approved_call_waiting_for_a_slot_ends_it_unsent(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path, one_slot=True) as setup:
            async with connect(setup.daemon.socket_path) as agent, trio.open_nursery() as nursery:
                slot = Slot(setup, agent, nursery)
                await slot.take()
                slot.call(SEARCH)
                [waiting] = await setup.pending()
                setup.daemon.approvals.decide(waiting.id, True, "uid 0 (root)")
                assert await slot.queued() == 1
                await setup.reload(DENY_SEARCH)
                # Ended at once, the slot still taken: not once the slot is free.
                assert await slot.queued() == 0
                result = slot.got[SEARCH]
                said = text(result)
                assert result["isError"] is True
                assert (
                    "policy changed while the call to 'mcp__tickets__search' waited for a free "
                    "slot at its server" in said
                )
                assert "searches are off today" in said
                await setup.server.tell("answer")
            assert text(slot.got[HOLD]) == "called hold"
            assert setup.reached("search") == 0
            records = await setup.records()
            [record] = [r for r in records if r.name == SEARCH]
            assert (record.decision, record.decided_by, record.outcome) == (
                "deny",
                "policy[0]",
                "refused",
            )
            assert record.reason == (
                "denied by policy[0] (the rules changed while the call waited): "
                "searches are off today"
            )


async def test_a_call_whose_tool_is_held_while_it_waits_for_a_slot_ends_unsent(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path, [], one_slot=True) as setup:
            sock = setup.daemon.socket_path
            async with (
                connect(sock, modern=False) as watcher,
                connect(sock) as agent,
                trio.open_nursery() as nursery,
            ):
                await watcher.initialize()
                slot = Slot(setup, agent, nursery)
                await slot.take()
                slot.call(SEARCH)  # no rule: let through
                assert await slot.queued() == 1
                setup.server.change()
                since = len(watcher.notifications)
                await setup.server.tell("announce")
                await heard(watcher, since, (TOOLS_CHANGED,))
                entry = setup.daemon.catalog.lookup(SEARCH)
                assert entry is not None and entry.held is not None
                assert await slot.queued() == 0
                result = slot.got[SEARCH]
                said = text(result)
                assert result["isError"] is True
                assert (
                    "changed while the call to it waited for a free slot at its server: it is "
                    "held" in said
                )
                await setup.server.tell("answer")
            assert text(slot.got[HOLD]) == "called hold"
            assert setup.reached("search") == 0
            records = await setup.records()
            [record] = [r for r in records if r.name == SEARCH]
            assert (record.decision, record.decided_by, record.outcome) == (
                "allow",
                "default",
                "refused",
            )
            assert record.reason is not None
            assert record.reason.startswith(
                "allowed by default, but the tool changed while the call waited: it is held"
            )


async def test_a_call_whose_rule_a_reload_removed_is_refused_naming_the_rule_as_it_was(
    tmp_path: Path,
) -> None:
    """The wait goes on (no new rule denies the call, and a person's approval is not
    skipped by a reload), but nobody approving it is not told of a rule in force."""
    asks = [{**ASK[0], "timeout": 1.0}]
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path, asks) as setup:
            async with connect(setup.daemon.socket_path) as agent, trio.open_nursery() as nursery:
                got: list[dict[str, Any]] = []

                async def call() -> None:
                    got.append(await agent.call(SEARCH, {"query": "a"}))

                nursery.start_soon(call)
                await setup.pending()
                await setup.reload([])
            [result] = got
            said = text(result)
            assert result["isError"] is True and "Nobody approved" in said
            assert "rule policy[0] of the rules as they were when it was called" in said
            assert "a reload has changed them since" in said
            assert setup.reached("search") == 0
            # Rules the same as when it was called are named as in force.
            await setup.reload(asks)
            async with connect(setup.daemon.socket_path) as agent:
                said = text(await agent.call(SEARCH, {"query": "b"}))
            assert "Nobody approved" in said and "rule policy[0])" in said
            assert "reload" not in said
