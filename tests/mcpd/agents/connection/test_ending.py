"""How an agent's connection ends with requests in flight, driven over a real socket
pair: the agent hangs up (or sends a line over the limit) and each call in flight is
given up once; its profile is removed (``leave``) and what it sends from then on is
refused with why, what it has in flight is answered, and only then does it close."""

from __future__ import annotations

import trio
import trio.testing

from protocol.jsonrpc import messages as rpc
from tests.support.clients.bare_connection import RESULT, call, cancel, connected, error_of, request
from tests.support.parts.routing import World

REMOVED = "the profile dev was removed"


# -- an agent that goes, or sends too much --


async def test_an_agent_that_hangs_up_mid_batch_has_each_call_given_up_once() -> None:
    world = World()
    tool = world.local("notes", "search")
    async with connected(world) as link:
        await link.agent.send([call(1, tool), call(2, tool), request(3, "test/wait")])
        await link.handler.started(3)
        await link.agent.send(cancel(1))
        await link.agent.pinged()
        link.agent.stream.socket.close()
        await link.done.wait()
        first, second = world.servers.started
        assert world.servers.cancelled == [first, second]
        assert link.handler.ended[3].is_set()
        # The server's answers after: nothing to write, nothing recorded twice.
        world.servers.answer(RESULT, 0)
        world.servers.answer(RESULT, 1)
    assert world.audit.outcomes() == [(tool, "cancelled"), (tool, "cancelled")]
    assert link.gone == 1


async def test_an_agent_that_hangs_up_has_each_call_in_flight_given_up_once() -> None:
    world = World()
    tool = world.local("notes", "search")
    async with connected(world) as link:
        await link.agent.send(call(1, tool), call(2, tool), request(3, "test/wait"))
        await link.handler.started(3)
        world.servers.answer(RESULT, 0)
        assert (await link.agent.line())["id"] == 1
        await link.agent.stream.send_eof()
        await link.done.wait()
        assert world.servers.cancelled == [world.servers.started[1]]
        assert link.handler.ended[3].is_set()
        world.servers.answer(RESULT, 1)
    assert world.audit.outcomes() == [(tool, "ok"), (tool, "cancelled")]
    assert link.gone == 1


async def test_a_line_over_the_limit_is_refused_and_nothing_after_it_is_read() -> None:
    world = World()
    tool = world.local("notes", "search")
    async with connected(world, max_line_bytes=4096) as link:
        await link.agent.send(call(1, tool))
        await link.agent.pinged()
        await link.agent.send(request(2, "test/other", {"pad": "x" * 5000}), request(3, "ping"))
        assert error_of(await link.agent.line()) == (
            None,
            rpc.INVALID_REQUEST,
            "message exceeds the 4096 byte line limit; closing",
        )
        await link.done.wait()
        assert world.servers.cancelled == world.servers.started
    assert link.handler.answered_now == ["ping"]
    assert link.gone == 1


# -- a connection whose profile is removed --


async def test_a_connection_leaving_refuses_what_comes_and_closes_once_all_is_answered() -> None:
    world = World()
    tool = world.local("notes", "search")
    async with connected(world) as link:
        await link.agent.send(call(1, tool), request(2, "test/wait"))
        await link.handler.started(2)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.conn.leave, REMOVED, 600)
            await trio.testing.wait_all_tasks_blocked()
            await link.agent.send(request(3, "test/other"), call(4, tool), request(5, "ping"))
            refused = f"{REMOVED}: this connection closes once its requests in flight are answered"
            for rid in (3, 4, 5):
                assert error_of(await link.agent.line()) == (rid, -32000, refused)
            await link.agent.send(cancel(2))  # its task ends, unanswered
            await link.handler.ended[2].wait()
            assert not link.done.is_set()  # the call still waits for its server
            world.servers.answer(RESULT, 0)
            reply = await link.agent.line()
            assert reply["id"] == 1 and reply["result"]["content"][0]["text"] == "done"
            await link.done.wait()
        assert world.servers.cancelled == [] and len(world.servers.started) == 1
    assert world.audit.outcomes() == [(tool, "refused"), (tool, "ok")]
    assert link.gone == 0


async def test_what_a_leaving_connection_has_not_answered_in_its_grace_is_answered_with_why() -> (
    None
):
    world = World()
    tool = world.local("notes", "search")
    async with connected(world) as link:
        await link.agent.send(call(1, tool), request(2, "test/wait"))
        await link.handler.started(2)
        await link.conn.leave(REMOVED, 0)
        late = f"{REMOVED}, and this request was not answered in the 0 s it was given"
        answered = [error_of(await link.agent.line()) for _ in range(2)]
        assert sorted(answered) == [(1, -32000, late), (2, -32000, late)]
        await link.done.wait()
        assert world.servers.cancelled == world.servers.started
        assert link.handler.ended[2].is_set()
        world.servers.answer(RESULT, 0)  # too late: nothing more is written or recorded
    assert world.audit.outcomes() == [(tool, "cancelled")]
