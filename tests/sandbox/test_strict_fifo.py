"""A strict server whose command is no regular file (a FIFO put where its program was,
by whoever may write that folder): mcpd checks what the kernel will open before it
starts a strict server, and that check never waits on the file, so the server fails to
start saying what its command is while the daemon goes on answering everyone else."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from tests.support.daemons.sandboxed import agent_of, serving, steady, text, wait_ready

pytestmark = pytest.mark.timeout(120)


async def test_a_strict_server_whose_command_is_a_fifo_fails_alone_saying_so(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "tool"
    folder.mkdir()
    fifo = folder / "server"
    os.mkfifo(fifo, 0o755)
    servers = {
        "piped": {"command": str(fifo), "sandbox": "strict", "read": [str(folder)]},
        "steady": steady(),
    }
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "steady")
            with trio.fail_after(30):
                while not (await d.status())["piped"]["last_error"]:
                    assert text(await agent.call("mcp__steady__tool0", {"text": "a"})) == "tool0:a"
                    await trio.sleep(0.05)
            said = (await d.status())["piped"]["last_error"]
            assert f"{fifo} is a FIFO, not a regular file the kernel can run" in said
            # Another agent is answered while the server keeps failing to start.
            async with agent_of(d) as other:
                with trio.fail_after(10):
                    reply = await other.call("mcp__steady__tool0", {"text": "b"})
                assert text(reply) == "tool0:b"
