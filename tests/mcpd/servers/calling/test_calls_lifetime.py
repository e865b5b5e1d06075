"""A finished tools/call is freed when its reply is written, not at its deadline.

Each call's state (its params, its reply callback, what routed it) used to stay
reachable from its server's deadline heap until a sweep, up to 64 calls later. Kept
that long, it lived through garbage collections, which then ran on every call path.
With finished calls gone from the heap, the timer is woken only for a deadline
earlier than the one it sleeps until, and that must still expire every call in time.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from mcpd.servers.calling.calls import Call
from tests.support.clients.agent import connect, make_config, running
from tests.support.system.procs import scripted


@pytest.fixture
def no_collector() -> Iterator[None]:
    # Only reference counting frees anything meanwhile: what is still counted is kept.
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def live_calls() -> int:
    return sum(isinstance(o, Call) for o in gc.get_objects())


async def test_finished_calls_are_not_kept(tmp_path: Path, no_collector: None) -> None:
    cmd, args = scripted("--names", "echo")
    cfg = make_config(tmp_path, {"s": {"command": cmd, "args": list(args)}}, health_interval=0)
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            for i in range(100):
                result = await agent.call("mcp__s__echo", {"text": f"call {i}"})
                assert not result.get("isError"), result
            assert live_calls() == 0
            # Calls at once, finishing in any order, are freed as well.
            async with trio.open_nursery() as nursery:
                for i in range(40):
                    nursery.start_soon(agent.call, "mcp__s__echo", {"text": f"burst {i}"})
            assert live_calls() == 0


async def test_a_shorter_limit_after_a_finished_call_still_expires(tmp_path: Path) -> None:
    # The first call finishes and leaves the heap; the timer still sleeps until that
    # call's deadline, half a minute away. The second call's limit is 0.3 s: it must
    # wake the timer, or the call would wait for the server's answer 3 s later.
    cmd, args = scripted("--names", "a,b", "--slow", "3.0")
    cfg = make_config(
        tmp_path,
        {"s": {"command": cmd, "args": list(args), "tool_timeouts": {"b": 0.3}}},
        health_interval=0,
        call_timeout=30.0,
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            first = await agent.call("mcp__s__a", {"text": "slow but in time"})
            assert not first.get("isError"), first
            start = trio.current_time()
            second = await agent.call("mcp__s__b", {"text": "too slow"})
            took = trio.current_time() - start
    assert second.get("isError"), second
    assert "no answer within 0.3 s" in second["content"][0]["text"]
    assert took < 2.0, f"the limit was kept {took:.2f} s, not 0.3 s"
