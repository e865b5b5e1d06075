"""What waits for a stdio server that stops reading its stdin is bounded, calls sent
straight to a free slot included, and a call given up before any of its line was
written never reaches the server: it reads the one line it had begun, whole, and
that call's cancellation."""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import connect, make_config, running
from transports.stdio.transport import StdioTransport

DEAF = str(Path(__file__).parents[3] / "support" / "servers" / "deaf.py")
LIMIT = 60
CALLS = 8
PAD = 4_000_000  # bytes of each call's arguments: all of them, far past 16 MiB
BOUND = 16 * 1024 * 1024


class Counted:
    """Sets ``done`` once ``count`` calls went through ``method`` of ``through``."""

    def __init__(self, through: object, method: str, count: int) -> None:
        self.done = trio.Event()
        self._left = count
        self._through = getattr(through, method)
        setattr(through, method, self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self._through(*args, **kwargs)
        self._left -= 1
        if not self._left:
            self.done.set()
        return out


async def test_calls_to_a_server_that_stopped_reading_keep_a_bound_and_are_taken_back(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "hear"
    os.mkfifo(fifo)
    servers = {
        "deaf": {
            "command": sys.executable,
            "args": [DEAF, str(fifo)],
            "sandbox": "off",
            "max_concurrency": CALLS,
        }
    }
    with trio.fail_after(LIMIT):
        async with (
            running(make_config(tmp_path, servers)) as daemon,
            connect(daemon.socket_path) as agent,
        ):
            transport = daemon.supervisor.servers["deaf"].upstream.transport
            assert isinstance(transport, StdioTransport)
            # Each call sent is one reply expected.
            sent = Counted(transport._pending, "expect", CALLS)
            forgotten = Counted(transport, "forget", CALLS)
            async with trio.open_nursery() as nursery:
                for rid in range(1, CALLS + 1):
                    params = {"name": "mcp__deaf__pad", "arguments": {"pad": "x" * PAD}}
                    nursery.start_soon(partial(agent.rpc, "tools/call", params, rid=rid))
                await sent.done.wait()
                # Past the bound, a call's line waits to be made until there is room.
                assert transport._writer.queued <= BOUND + PAD + 1024
                for rid in range(1, CALLS + 1):
                    cancel = {"method": "notifications/cancelled", "params": {"requestId": rid}}
                    await agent.send_raw(json.dumps({"jsonrpc": "2.0", **cancel}).encode() + b"\n")
                await forgotten.done.wait()
                # What is left is the rest of the one line the server began to read.
                assert transport._writer.queued <= PAD + 1024
                nursery.cancel_scope.cancel()
            with open(fifo, "wb") as hear:
                hear.write(b"go")
            report = await agent.call("mcp__deaf__report")
    read = json.loads(report["content"][0]["text"])
    (method, begun), *rest = read
    assert method == "tools/call"
    assert rest == [["notifications/cancelled", begun]]
