"""A tool's result that holds a number no double holds (``1e400``), through a running
daemon: in ``structuredContent`` it reaches the agent as the server wrote it, whether
mcpd cuts the result's text or rewrites its links; in a content block mcpd must read
to do either, the agent is told the server sent a malformed reply."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.system.procs import scripted

LIMIT = 60


async def test_a_number_no_double_holds_is_passed_on_or_named_the_servers_fault(
    tmp_path: Path,
) -> None:
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
    for name in ("linked", "long"):
        assert b'"structuredContent":{"c": 1e400}' in got[name, False], got[name, False]
        said = got[name, True]
        assert b"The tool server 'odd'" in said and b"malformed" in said, said
        assert b"fault in mcpd" not in said
    assert b'"uri":"mcpd://odd/file:///a"' in got["linked", False]
    assert b"more characters were cut here" in got["long", False]
