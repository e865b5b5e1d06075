"""A tool's result that holds a number no double holds (``1e400``), through a running
daemon: wherever it is, in ``structuredContent`` or in a content block, and whether
mcpd would cut the result's text or rewrite its links, the agent is told the server
sent a malformed reply naming the number, and not that mcpd failed."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.system.procs import scripted

LIMIT = 60


async def test_a_number_no_double_holds_is_named_the_servers_fault(tmp_path: Path) -> None:
    command, args = scripted("--names", "linked,long", "--out-of-range")
    servers = {"odd": {"command": command, "args": list(args)}}
    cfg = make_config(tmp_path, servers, result_budget_chars=100)
    got: dict[tuple[str, bool], bytes] = {}
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            for name in ("linked", "long"):
                for in_content in (False, True):
                    params = {"name": f"mcp__odd__{name}", "arguments": {"in_content": in_content}}
                    got[name, in_content] = await agent.rpc_text("tools/call", params)
    for said in got.values():
        assert b"The tool server 'odd' sent a malformed reply" in said, said
        assert b"a number no JSON decoder reads (one past the largest double" in said, said
        assert b"1e400" not in said and b"fault in mcpd" not in said
