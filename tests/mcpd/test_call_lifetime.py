"""A finished tools/call is freed when its reply is written, not at its deadline.

Each call's state (its params, its reply callback, what routed it) used to stay
reachable from its server's deadline heap until a sweep, up to 64 calls later. Kept
that long, it lived through garbage collections, which then ran on every call path.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from mcpd.servers.calls import PendingCall
from tests.support.agent import connect, make_config, running
from tests.support.procs import scripted


@pytest.fixture
def no_collector() -> Iterator[None]:
    # Only reference counting frees anything meanwhile: what is still counted is kept.
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def live_calls() -> int:
    return sum(isinstance(o, PendingCall) for o in gc.get_objects())


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
