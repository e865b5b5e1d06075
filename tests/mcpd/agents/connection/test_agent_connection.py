"""One agent connection driven over a real socket pair, with a stand-in for the socket
API behind it and a router over stand-in servers: the lifecycle answered in the order
it came, ids in use and the in-flight limit refused, cancellation of a call and of a
request running in a task, answers to what a server asked, batches, and an agent that
cancels or reuses ids while calls are in flight: each call is given up once and no
reply goes to a call it cancelled."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpd.servers.asking.askback import NO_ANSWER
from mcpd.servers.shared import AgentKey
from protocol.jsonrpc import messages as rpc
from tests.support.clients.agent import META
from tests.support.clients.bare_connection import RESULT, call, cancel, connected, error_of, request
from tests.support.parts.routing import World

# -- the lifecycle, and what runs in a task --


async def test_the_lifecycle_is_answered_in_the_order_it_came_whatever_waits_before_it() -> None:
    async with connected() as link:
        await link.agent.send(
            request(1, "initialize"),
            request(2, "test/wait"),
            request(3, "ping"),
            request(4, "server/discover"),
            request(5, "test/other"),
        )
        assert [(await link.agent.line())["id"] for _ in range(4)] == [1, 3, 4, 5]
        assert link.handler.answered_now == ["initialize", "ping", "server/discover"]
        await link.handler.started(2)
        assert not link.handler.ended[2].is_set()  # still waits, unanswered
        assert link.conn.spoke_mcp and link.conn.asked.is_set()


async def test_what_an_agent_leaves_is_kept_under_an_object_of_its_own_not_the_connection() -> None:
    # Handing the connection where its owner is meant cannot type-check, nor match.
    async with connected() as link:
        conn = link.conn
        assert isinstance(conn.owner, AgentKey) and not isinstance(conn, AgentKey)
        assert conn.listen_owner is conn.owner and conn.refusing_asker.owner is conn.owner


async def test_a_connection_that_sent_only_mcpd_commands_is_not_an_agent() -> None:
    async with connected() as link:
        await link.agent.send(request(1, "mcpd/status"))
        assert (await link.agent.line())["id"] == 1
        assert not link.conn.spoke_mcp
        await link.agent.pinged()
        assert link.conn.spoke_mcp


# -- ids in use and the in-flight limit --


async def test_an_id_in_use_is_refused_and_the_request_holding_it_keeps_it() -> None:
    world = World()
    tool = world.local("notes", "search")
    async with connected(world) as link:
        await link.agent.send(request(7, "test/wait"), call(8, tool))
        await link.handler.started(7)
        # The same ids again, as every kind of request.
        await link.agent.send(request(7, "ping"), call(7, tool), request(8, "test/other"))
        await link.agent.send(call(8, tool), request(8, "test/wait"))
        for _ in range(5):
            rid, code, message = error_of(await link.agent.line())
            assert code == rpc.INVALID_REQUEST
            assert message == f"id {rid!r} is already in use"
        assert len(world.servers.started) == 1
        world.servers.answer(RESULT)
        reply = await link.agent.line()
        assert reply["id"] == 8 and reply["result"]["content"][0]["text"] == "done"
        assert not link.handler.ended[7].is_set()
        # Each call refused for its id left a record, as any refused call does.
        turned_away = [r for r in world.audit.records if r.outcome == "refused"]
        assert [(r.name, r.decision, r.reason) for r in turned_away] == [
            (tool, "none", "its id was in use by a request in flight")
        ] * 2
        # An id that ended is free again.
        await link.agent.send(call(8, tool))
        await link.agent.pinged()
        world.servers.answer(RESULT)
        assert (await link.agent.line())["id"] == 8
        assert len(world.servers.started) == 2


@pytest.mark.parametrize("splice", [True, False])
async def test_past_the_in_flight_limit_a_request_is_refused_until_one_ends(
    splice: bool, caplog: pytest.LogCaptureFixture
) -> None:
    world = World(splice=splice)
    tool = world.local("notes", "search")
    async with connected(world, max_inflight_per_connection=2) as link:
        await link.agent.send(call(1, tool), request(2, "test/wait"))
        await link.handler.started(2)
        await link.agent.send(call(3, tool), request(4, "test/other"), call(5, tool))
        for rid in (3, 4, 5):
            assert error_of(await link.agent.line()) == (
                rid,
                -32000,
                "too many requests in flight on this connection (limit 2)",
            )
        assert len(world.servers.started) == 1
        # A ping holds nothing, and an agent at its limit still learns mcpd is there.
        await link.agent.send(request(9, "ping"))
        pong = await link.agent.line()
        assert pong["id"] == 9 and pong["result"] == {"lifecycle": "ping"}
        world.servers.answer(RESULT)
        assert (await link.agent.line())["id"] == 1
        await link.agent.send(request(6, "test/other"))
        assert (await link.agent.line())["id"] == 6
        reasons = [(r.name, r.outcome, r.reason) for r in world.audit.records]
        assert reasons == [
            (tool, "refused", "its agent had as many requests in flight as it may")
        ] * 2 + [(tool, "ok", None)]
    # The first refusal is logged naming the agent, the rest counted when it goes.
    said = [r.getMessage() for r in caplog.records if "flight" in r.getMessage()]
    assert said == [
        "agent (peer unknown) has 2 requests in flight, the limit; refusing more until some end",
        "agent (peer unknown) had 3 requests in all refused at the in-flight limit",
    ]


# -- cancellation --


async def test_a_call_cancelled_is_given_up_once_and_its_late_answer_dropped() -> None:
    world = World()
    tool = world.local("notes", "search")
    async with connected(world) as link:
        await link.agent.send(call(1, tool), call(2, tool))
        await link.agent.pinged()
        first = world.servers.started[0]
        await link.agent.send(cancel(1), cancel(1))
        await link.agent.pinged()
        assert world.servers.cancelled == [first]
        assert world.audit.outcomes() == [(tool, "cancelled")]
        world.servers.answer(RESULT, 0)  # the server answers all the same
        world.servers.answer(RESULT, 1)
        assert (await link.agent.line())["id"] == 2
        await link.agent.pinged()
        assert world.audit.outcomes() == [(tool, "cancelled"), (tool, "ok")]
        assert world.servers.cancelled == [first]


async def test_a_request_in_a_task_cancelled_ends_and_gets_no_answer() -> None:
    async with connected() as link:
        await link.agent.send(request("w", "test/wait"))
        await link.handler.started("w")
        await link.agent.send(cancel("w"))
        await link.handler.ended["w"].wait()
        await link.agent.pinged()
        assert link.conn.inflight.requests == {}


@pytest.mark.parametrize(
    "params",
    [
        None,
        [],
        "1",
        {},
        {"requestId": None},
        {"requestId": [1]},
        {"requestId": {"id": 1}},
        {"requestId": 1.5},
        {"requestId": True},
        {"requestId": "1"},  # the request's id is the number 1
        {"requestId": 99},  # never sent
        {"requestId": "mcpd-1"},  # an id of mcpd's own requests to the agent
    ],
)
async def test_a_cancel_for_no_request_of_the_agents_cancels_nothing_and_is_not_answered(
    params: Any, caplog: pytest.LogCaptureFixture
) -> None:
    world = World()
    tool = world.local("notes", "search")
    async with connected(world) as link:
        await link.agent.send(call(1, tool), request(2, "test/ask"))
        assert (await link.agent.line())["method"] == "roots/list"
        note: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
        if params is not None:
            note["params"] = params
        await link.agent.send(note)
        await link.agent.pinged()
        assert world.servers.cancelled == [] and set(link.conn.inflight.requests) == {1, 2}
        world.servers.answer(RESULT)
        assert (await link.agent.line())["id"] == 1
    assert "mcpd failed" not in caplog.text


async def test_a_flood_of_cancels_costs_nothing_and_cancels_only_what_it_names() -> None:
    world = World()
    tool = world.local("notes", "search")
    async with connected(world) as link:
        await link.agent.send(call(1, tool), call(2, tool))
        await link.agent.send(*(cancel(n) for n in range(3, 20_000)), cancel(2))
        await link.agent.pinged()
        assert world.servers.cancelled == [world.servers.started[1]]
        assert list(link.conn.inflight.requests) == [1]


async def test_a_cancel_for_a_call_answered_already_changes_nothing() -> None:
    world = World()
    tool = world.local("notes", "search")
    async with connected(world) as link:
        await link.agent.send(call(1, tool))
        await link.agent.pinged()
        world.servers.answer(RESULT)
        assert (await link.agent.line())["id"] == 1
        await link.agent.send(cancel(1))
        await link.agent.pinged()
        assert world.servers.cancelled == []
        assert world.audit.outcomes() == [(tool, "ok")]


# -- what a server asks the agent --


async def test_the_agents_answer_reaches_the_request_that_asked_and_no_other() -> None:
    async with connected() as link:
        await link.agent.send(request(1, "test/ask"), request(2, "test/ask"))
        asked = [await link.agent.line(), await link.agent.line()]
        assert [a["method"] for a in asked] == ["roots/list", "roots/list"]
        first, second = (a["id"] for a in sorted(asked, key=lambda a: a["params"]["for"]))
        assert first != second and {first, second}.isdisjoint({1, 2})
        # Answers to what nobody asked, and to the agent's own requests: dropped.
        strays = [{"jsonrpc": "2.0", "id": rid, "result": {}} for rid in (1, 2, "mcpd-99", 0)]
        await link.agent.send(*strays)
        await link.agent.pinged()
        await link.agent.send({"jsonrpc": "2.0", "id": second, "result": {"roots": ["b"]}})
        assert await link.agent.line() == {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {"agent said": {"roots": ["b"]}},
        }
        await link.agent.send(
            {"jsonrpc": "2.0", "id": first, "error": {"code": -1, "message": "no"}},
            {"jsonrpc": "2.0", "id": first, "result": {"roots": ["again"]}},  # once only
        )
        assert error_of(await link.agent.line()) == (1, -1, "no")
        await link.agent.pinged()


async def test_a_request_waiting_for_the_agents_answer_fails_when_it_hangs_up() -> None:
    async with connected() as link:
        await link.agent.send(request(1, "test/ask"))
        await link.agent.line()
        await link.agent.stream.send_eof()
        assert error_of(await link.agent.line()) == (1, NO_ANSWER, "the agent disconnected")
        await link.done.wait()
    assert link.gone == 1


# -- batches --


async def test_a_batch_is_answered_in_one_line_once_its_calls_are_answered() -> None:
    world = World()
    tool = world.local("notes", "search")
    async with connected(world) as link:
        batch = [
            request(1, "ping"),
            call(2, tool),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            request(3, "test/other"),
            call(4, tool),
            request(1, "ping"),  # its id is taken in this very batch
            "not a message",
        ]
        await link.agent.send(batch)
        await link.agent.pinged()  # nothing of the batch goes before it is whole
        world.servers.answer(RESULT, 0)
        await link.agent.send(cancel(4))
        line = await link.agent.line()
        assert isinstance(line, list)
        assert sorted(str(m.get("id")) for m in line) == ["1", "1", "2", "3", "None"]
        assert world.servers.cancelled == [world.servers.started[1]]
        await link.agent.pinged()
        # A call of a batch that reuses an id in flight is refused and recorded.
        await link.agent.send(call(9, tool))
        await link.agent.pinged()
        await link.agent.send([call(9, tool), request(10, "ping")])
        line = await link.agent.line()
        assert sorted(str(m.get("id")) for m in line) == ["10", "9"]
        assert world.audit.records[-1].reason == "its id was in use by a request in flight"


@pytest.mark.parametrize("line", [b"[]", b"[", b"[1, 2", b'[{"jsonrpc":"2.0"}]'])
async def test_a_batch_that_is_none_gets_one_error(line: bytes) -> None:
    async with connected() as link:
        await link.agent.send(line)
        reply = await link.agent.line()
        if isinstance(reply, list):
            [reply] = reply
        assert reply["id"] is None and reply["error"]["code"] in (-32700, -32600)
        await link.agent.pinged()


# -- lines that cannot be read --


async def test_a_line_that_is_not_json_rpc_is_answered_and_the_connection_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with connected() as link:
        for line in (b"{", b"42", b'{"jsonrpc":"2.0","id":{},"method":"ping"}', b"\xff\xfe"):
            await link.agent.send(line)
            reply = await link.agent.line()
            assert reply["error"]["code"] in (-32700, -32600)
        await link.agent.pinged()
    said = [r.getMessage() for r in caplog.records if "not JSON-RPC" in r.getMessage()]
    assert (
        len(said) == 2
        and said[1] == "agent (peer unknown) sent 4 lines in all that were not JSON-RPC"
    )


@pytest.mark.parametrize(
    "params",
    [None, [], "x", {}, {"name": 5}, {"name": "t", "arguments": {}, "_meta": []}],
)
async def test_a_call_that_cannot_be_read_is_refused_and_recorded(
    params: Any, caplog: pytest.LogCaptureFixture
) -> None:
    world = World()
    async with connected(world) as link:
        await link.agent.send(request(1, "tools/call", params))
        rid, code, message = error_of(await link.agent.line())
        assert (rid, code) == (1, rpc.INVALID_PARAMS)
        assert message.startswith("Invalid params")
        await link.agent.pinged()
        assert link.conn.inflight.requests == {} and world.servers.started == []
    [record] = world.audit.records
    assert (record.method, record.outcome, record.reason) == ("tools/call", "error", message)
    assert "mcpd failed" not in caplog.text


async def test_a_call_nested_deeper_than_json_can_be_read_is_an_error_of_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = World()
    tool = world.local("notes", "search")
    deep = b"[" * 5000 + b"]" * 5000
    meta = json.dumps(META).encode()[:-1] + b', "x": ' + deep + b"}"
    line = json.dumps(call(1, tool, None)).encode().replace(b"null", meta)
    async with connected(world) as link:
        await link.agent.send(line, b"[" + line + b"]")
        for _ in range(2):
            reply = await link.agent.line()
            if isinstance(reply, list):
                [reply] = reply
            assert reply["error"]["code"] in (rpc.PARSE_ERROR, rpc.INVALID_REQUEST)
        await link.agent.pinged()
    assert "mcpd failed" not in caplog.text
