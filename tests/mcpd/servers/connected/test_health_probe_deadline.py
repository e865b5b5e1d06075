"""A liveness probe asked for while the server's own task waits for a list keeps its
own deadline: a server that stopped reading its stdin while mcpd fetched its changed
tool list is found out by the probe after a call runs out of time, not once the list
request runs out of its own, longer time."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import trio

from tests.support.clients.agent import connect, make_config, running

DEAF = str(Path(__file__).parents[3] / "support" / "servers" / "deaf.py")
LIMIT = 60


class Journal(logging.Handler):
    """What mcpd logs; ``ended`` is set once the session ends for want of an answer."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []
        self.ended = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.messages.append(message)
        if "stopped responding" in message:
            self.ended.set()


async def test_a_probe_after_a_call_ran_out_of_time_does_not_wait_for_a_list_under_way(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "hear"
    os.mkfifo(fifo)
    servers = {
        "deaf": {
            "command": sys.executable,
            "args": [DEAF, str(fifo), "--changed"],
            "sandbox": "off",
            "call_timeout": 1.0,
        }
    }
    journal = Journal()
    logger = logging.getLogger("mcpd")
    logger.addHandler(journal)
    try:
        with trio.fail_after(LIMIT):
            # The list asked for again after the server's list_changed waits up to 20 s.
            cfg = make_config(tmp_path, servers, list_timeout=20.0)
            async with (
                running(cfg) as daemon,
                connect(daemon.socket_path) as agent,
            ):
                reply = await agent.rpc("tools/call", {"name": "mcp__deaf__pad", "arguments": {}})
                assert "error" in reply or reply["result"].get("isError"), reply
                await journal.ended.wait()
    finally:
        logger.removeHandler(journal)
    ended = next(m for m in journal.messages if "stopped responding" in m)
    assert "a probe got no answer in 5 s" in ended
    before = journal.messages[: journal.messages.index(ended)]
    assert not [m for m in before if "tools/list" in m], before
