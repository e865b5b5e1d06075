"""What the calls waiting for a slot at their servers and the other requests under way
there may keep: one agent's, one user's and everyone's bytes bounded, counted while a
call waits (a request is under way) and given back as it leaves (ends), and a call past
a bound refused with a result that names it, a request with an error that does. Then
through a running daemon: an agent's big calls past its bound are refused at once and
recorded so, while another agent's call still waits and is answered, and an agent that
hangs up leaves nothing counted; an agent's big prompts/get and resources/read at a
server that never answers them are refused past its bound, named and recorded so,
while another agent's small one is still sent."""

from __future__ import annotations

import array
import contextlib
import json
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec import Raw

from mcpd.servers.calling.calls import Call, Whose
from mcpd.servers.calling.queue_bytes import (
    META_KEY,
    MIB,
    OWN_RESERVE,
    PER_AGENT,
    PER_USER,
    TOTAL,
    QueueBytes,
    Unqueued,
    carried,
)
from mcpd.servers.calling.turns import TurnQueue
from protocol.mcp import core as mcp
from protocol.mcp.features import GetPromptParams, ReadResourceParams
from tests.support.clients.agent import META, Agent, connect, make_config, running
from tests.support.daemons.fault_harness import HOSTILE_STDIO
from tests.support.daemons.policy import text
from tests.support.parts.calls import a_call
from tests.support.system.peer_probe import PEER_PROBE

LIMIT = 60


def whose(uid: int | None, pid: int | None, own: bool = False) -> Whose:
    return Whose(uid=uid, pid=pid, own=own)


def of_size(size: int, by: Whose) -> Call:
    """A call whose arguments are ``size`` bytes."""
    call, _ = a_call("t", Raw(b'"' + b"x" * (size - 2) + b'"'), whose=by)
    return call


def queue(kept: QueueBytes, *calls: Call) -> TurnQueue:
    """``calls`` weighed and queued, as a scheduler queues what may wait."""
    q = TurnQueue(kept)
    for call in calls:
        assert kept.refusal(call, "s") is None
        q.append(call)
    return q


def refusal_text(kept: QueueBytes, call: Call) -> str:
    result = kept.refusal(call, "s")
    assert result is not None and result.isError
    block = result.content[0]
    assert isinstance(block, mcp.TextContent)
    return block.text


# -- the shares --


def test_one_agent_may_keep_its_share_at_every_server_together() -> None:
    kept = QueueBytes()
    agent = whose(1000, 10)
    queue(kept, of_size(PER_AGENT // 2, agent))
    queue(kept, of_size(PER_AGENT // 2, agent))  # another server's queue
    words = refusal_text(kept, of_size(16, agent))
    assert "this agent has waiting" in words and "one agent's may keep 32.0 MiB" in words
    assert "not an outage" in words
    assert kept.refusal(of_size(PER_AGENT // 2, whose(1000, 11)), "s") is None


def test_one_users_processes_together_may_keep_the_users_share() -> None:
    """Many processes of one user other than mcpd's own and root, each within its
    share, still stop at the user's; another user's calls, and mcpd's own user's,
    are not held to it."""
    kept = QueueBytes()
    for pid in range(PER_USER // (PER_AGENT // 2)):
        queue(kept, of_size(PER_AGENT // 2, whose(1000, pid)))
    words = refusal_text(kept, of_size(16, whose(1000, 99)))
    assert "uid 1000" in words and "one user's may keep 64.0 MiB" in words
    assert kept.refusal(of_size(PER_AGENT, whose(1001, 99)), "s") is None
    assert kept.refusal(of_size(PER_AGENT, whose(1000, 99, own=True)), "s") is None


def test_all_waiting_calls_are_bounded_and_mcpds_own_user_keeps_some_room() -> None:
    kept = QueueBytes()
    users = TOTAL // PER_USER
    for uid in range(users):
        queue(kept, *(of_size(PER_AGENT, whose(uid, 100 + uid * 10 + i)) for i in range(2)))
    assert kept.total == TOTAL
    words = refusal_text(kept, of_size(16, whose(users, 1)))
    assert "all may keep 256.0 MiB" in words
    own = whose(0, 1, own=True)
    queue(kept, of_size(OWN_RESERVE, own))
    words = refusal_text(kept, of_size(16, whose(0, 2, own=True)))
    assert "all may keep 256.0 MiB, and mcpd's own user and root 32.0 MiB more" in words


def test_a_call_that_waits_keeps_its_own_copy_of_what_it_carries() -> None:
    """A part of an agent's line keeps the whole line: what a waiting call carries is
    copied out, so the line can go and the bytes counted are the bytes kept."""
    line = array.array("b", b'{"arguments":{"a":1},"padding":"' + b"x" * MIB + b'"}')
    gone = weakref.ref(line)
    call, _ = a_call("t", Raw(memoryview(line)[13:20]))
    del line
    assert gone() is not None  # the call's arguments keep it
    assert QueueBytes().refusal(call, "s") is None
    assert gone() is None
    assert isinstance(call.arguments, Raw) and bytes(call.arguments) == b'{"a":1}'
    assert call.kept == len(b'{"a":1}')


# -- given back --


def test_a_call_gives_its_bytes_back_however_it_leaves_the_queue() -> None:
    kept = QueueBytes()
    agent, other = whose(1000, 10), whose(1000, 11)
    first, second, third, fourth = (of_size(8 * MIB, by) for by in (agent, other, agent, other))
    q = queue(kept, first, second, third, fourth)
    assert kept.total == 32 * MIB and kept.of_agent(agent) == 16 * MIB
    assert q.take() is first  # sent
    q.remove(fourth)  # cancelled: its agent stopped waiting, or hung up
    assert q.pop_first() is second  # out of time
    assert (kept.total, kept.of_agent(agent), kept.of_agent(other)) == (8 * MIB, 8 * MIB, 0)
    q.remove(third)
    assert kept.total == 0 and kept.of_user(agent) == 0


def test_a_request_keeps_its_bytes_while_under_way_and_past_a_bound_is_refused() -> None:
    """A request's params (and its ``_meta`` once more) count with the waiting calls
    for as long as it is under way, and are given back however it ends; one past its
    agent's bound is refused with a JSON-RPC error that names the bound, sent nowhere."""
    kept, agent, other = QueueBytes(), whose(1000, 11), whose(1000, 12)
    big = GetPromptParams(name="p", arguments=Raw(b'"' + b"x" * (20 * MIB) + b'"'))
    read = ReadResourceParams(uri="file:///r", meta={"x": "x" * (4 * MIB)})
    assert carried(read) > 8 * MIB  # the line's and, decoded apart, the _meta's
    waiting = of_size(4 * MIB, agent)
    q = queue(kept, waiting)
    with kept.under_way(agent, "s", "prompts/get", big):
        assert kept.of_agent(agent) == 4 * MIB + carried(big)
        with pytest.raises(Unqueued) as info, kept.under_way(agent, "s", "resources/read", read):
            pass
        error = info.value
        assert "mcpd did not send this resources/read to 's'" in error.message
        assert "one agent's may keep 32.0 MiB" in error.message
        assert "not an outage" in error.message
        assert error.reason.startswith("not sent") and "32.0 MiB" in error.reason
        assert isinstance(error.data, dict) and error.data[META_KEY]["bound"] == "agent"
        with kept.under_way(other, "s", "resources/read", read):  # another agent's
            assert kept.of_agent(other) == carried(read)
        assert kept.of_agent(other) == 0
    assert kept.of_agent(agent) == 4 * MIB  # the call still waits
    with pytest.raises(OSError), kept.under_way(agent, "s", "resources/read", read):
        raise OSError  # it failed
    q.remove(waiting)
    assert kept.total == 0


# -- through a running daemon --


def big_call(name: str, mib: int) -> dict[str, Any]:
    return {"name": name, "arguments": {"text": "x" * (mib * MIB)}}


async def send_call(agent: Agent, rid: int, name: str, mib: int = 0) -> None:
    """A tools/call of ``name`` with ``mib`` MiB of arguments under the id ``rid``, its
    reply not waited for."""
    params = {**big_call(name, mib), "_meta": META}
    line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
    await agent.send_raw(line.encode() + b"\n")


async def test_an_agents_big_calls_past_its_bound_are_refused_and_another_agent_is_served(
    tmp_path: Path,
) -> None:
    """Both servers' one slot is held. One agent queues big calls at one until they
    would pass what one agent's waiting calls may keep at both, and its next, at the
    other, is refused at once with a result that names the bound and says it is no
    outage, recorded as refused and why. Once it hangs up, an agent of its process may
    have as much waiting as before; and an agent of another process still has its
    small call wait, and answered once the slot frees."""
    server = {"command": sys.executable, "args": [HOSTILE_STDIO], "max_concurrency": 1}
    config = make_config(
        tmp_path,
        {"bad": server, "bad2": server},
        state_dir=str(tmp_path / "state"),
        audit_journal=False,
    )
    socket = str(config.daemon.socket)
    with trio.fail_after(LIMIT):
        async with running(config) as daemon:
            scheduler = daemon.supervisor.servers["bad"].scheduler
            queued, hung_up = trio.Event(), trio.Event()
            let_go: list[Call] = []
            scheduler_start, scheduler_cancel = scheduler.start, scheduler.cancel

            def start(call: Call) -> None:
                scheduler_start(call)
                if call.state == "queued" and call.original == "echo":
                    queued.set()

            def cancel(call: Call) -> None:
                if call.state == "queued":
                    let_go.append(call)
                scheduler_cancel(call)
                if len(let_go) == 2:
                    hung_up.set()

            scheduler.start, scheduler.cancel = start, cancel  # type: ignore[method-assign]
            async with connect(socket) as holder:
                await send_call(holder, 1, "mcp__bad__never")
                await send_call(holder, 2, "mcp__bad2__never")
                async with connect(socket) as agent:
                    await send_call(agent, 1, "mcp__bad__never", 12)
                    await send_call(agent, 2, "mcp__bad__never", 12)
                    reply = await agent.rpc("tools/call", big_call("mcp__bad2__never", 12), rid=3)
                    words = text(reply["result"])
                    assert reply["result"]["isError"] and "'bad2'" in words, reply
                    assert "one agent's may keep 32.0 MiB" in words and "not an outage" in words
                    assert agent.unmatched == []  # its first two wait
                await hung_up.wait()  # both its calls were let go, still waiting
                async with connect(socket) as again:
                    await send_call(again, 1, "mcp__bad__never", 12)
                    await send_call(again, 2, "mcp__bad__never", 12)
                    reply = await again.rpc("tools/call", big_call("mcp__bad__never", 12), rid=3)
                    assert "32.0 MiB" in text(reply["result"])
                    assert again.unmatched == []  # nothing of the agent gone counted
                    answered = await served_while_queued(socket, queued, holder)
                    assert text(json.loads(answered)["result"]) == "echo:hi"
            await daemon.audit.flush()
    records = [json.loads(x) for x in (tmp_path / "state" / "calls.jsonl").read_text().splitlines()]
    refused = [r for r in records if r["outcome"] == "refused"]
    assert [r["server"] for r in refused] == ["bad2", "bad"], records
    assert all("32.0 MiB" in r["reason"] for r in refused)


async def served_while_queued(socket: str, queued: trio.Event, holder: Agent) -> str:
    """The reply another process gets to a small call that waits for the slot
    ``holder`` holds, which it lets go once the call waits."""
    probe = [["tools/call", {"name": "mcp__bad__echo", "arguments": {"text": "hi"}}]]
    replies: list[str] = []

    async def other_process() -> None:
        done = await trio.run_process(
            [sys.executable, "-c", PEER_PROBE, socket, json.dumps(probe)],
            capture_stdout=True,
            stdin=subprocess.DEVNULL,
        )
        replies.append(done.stdout.decode())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other_process)
        await queued.wait()
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        await holder.send_raw(json.dumps(cancel).encode() + b"\n")
    return replies[0]


UNANSWERING = str(Path(__file__).parents[3] / "support" / "servers" / "unanswering.py")
NEVER_URI = "file:///never"  # the resource it never gives


async def send_request(agent: Agent, rid: int, method: str, params: dict[str, Any]) -> None:
    """A request under the id ``rid``, its reply not waited for."""
    line = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {"_meta": META, **params}}
    await agent.send_raw(json.dumps(line).encode() + b"\n")


def big_prompt(mib: int) -> dict[str, Any]:
    return {"name": "mcp__srv__never", "arguments": {"text": "x" * (mib * MIB)}}


async def test_an_agents_big_requests_at_a_server_that_never_answers_are_refused_past_its_bound(
    tmp_path: Path,
) -> None:
    """A server never answers a prompts/get or a resources/read. One agent's two big
    prompts/get are under way there; its next prompts/get, and a resources/read whose
    ``_meta`` is big, would pass what one agent's may keep: each is refused at once with
    an error that names the bound and says it is no outage, recorded as refused and
    why. An agent of another process still has its small prompts/get sent, and
    answered."""
    server = {"command": sys.executable, "args": [UNANSWERING], "max_concurrency": 1}
    config = make_config(
        tmp_path, {"srv": server}, state_dir=str(tmp_path / "state"), audit_journal=False
    )
    socket = str(config.daemon.socket)
    with trio.fail_after(LIMIT):
        async with running(config) as daemon:
            waiting = daemon.supervisor.waiting
            both = trio.Event()
            held: list[str] = []
            under_way = waiting.under_way

            @contextlib.contextmanager
            def counted(*asked: Any) -> Iterator[None]:
                with under_way(*asked):
                    held.append(asked[1])
                    if len(held) == 2:
                        both.set()
                    yield

            waiting.under_way = counted  # type: ignore[method-assign]
            async with connect(socket) as agent:
                await send_request(agent, 1, "prompts/get", big_prompt(12))
                await send_request(agent, 2, "prompts/get", big_prompt(12))
                await both.wait()
                reply = await agent.rpc("prompts/get", big_prompt(12), rid=3)
                assert_refused(reply, "prompts/get")
                meta = {**META, "big": "x" * (6 * MIB)}
                read = {"uri": NEVER_URI, "_meta": meta}
                reply = await agent.rpc("resources/read", read, rid=4, meta=False)
                assert_refused(reply, "resources/read")
                assert agent.unmatched == []  # its first two are under way still
                probe = [["prompts/get", {"name": "mcp__srv__echo", "arguments": {"text": "hi"}}]]
                done = await trio.run_process(
                    [sys.executable, "-c", PEER_PROBE, socket, json.dumps(probe)],
                    capture_stdout=True,
                    stdin=subprocess.DEVNULL,
                )
                answer = json.loads(done.stdout)
                assert answer["result"]["messages"][0]["content"]["text"] == "hi", answer
            await daemon.audit.flush()
    records = [json.loads(x) for x in (tmp_path / "state" / "calls.jsonl").read_text().splitlines()]
    refused = [r for r in records if r["outcome"] == "refused"]
    assert [r["method"] for r in refused] == ["prompts/get", "resources/read"], records
    assert all("32.0 MiB" in r["reason"] and r["server"] == "srv" for r in refused), refused


def assert_refused(reply: dict[str, Any], method: str) -> None:
    """``reply`` is mcpd's refusal of a ``method`` past one agent's bound."""
    error = reply["error"]
    assert f"mcpd did not send this {method} to 'srv'" in error["message"], reply
    assert "one agent's may keep 32.0 MiB" in error["message"]
    assert "not an outage" in error["message"]
    assert error["data"][META_KEY]["bound"] == "agent"
