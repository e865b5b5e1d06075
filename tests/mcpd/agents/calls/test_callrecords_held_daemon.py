"""A call to a held tool, refused before its server or any rule sees it, is recorded
under the tool's server and the server's name for it, as a held prompt's is: a search
of the log by server and failure finds it."""

from __future__ import annotations

from pathlib import Path

import trio

from mcpd.audit.reader import AuditRecords
from tests.support.clients.agent import connect, running
from tests.support.daemons.pins import Changing, config, relist


async def test_a_refused_call_to_a_held_tool_names_its_server(tmp_path: Path) -> None:
    server = Changing(tmp_path, "modern")
    cfg = config(tmp_path, {"tickets": server.config()}, audit_journal=False)
    with trio.fail_after(90):
        async with running(cfg) as daemon:
            async with connect(daemon.socket_path, modern=False) as agent:
                await agent.initialize()  # a legacy agent: told of the change
                server.change()
                await relist(agent, agent)
                refused = await agent.call("mcp__tickets__search", {"query": "x"})
                assert refused["isError"] is True
                got = await agent.rpc("prompts/get", {"name": "mcp__tickets__daily"})
                assert "held" in got["error"]["message"]
            await daemon.oversight.audit.flush()
    failed = [
        (r.method, r.name, r.server, r.original)
        for r in AuditRecords(str(tmp_path / "state"))
        if r.server == "tickets" and r.outcome != "ok"
    ]
    assert failed == [
        ("tools/call", "mcp__tickets__search", "tickets", "search"),
        ("prompts/get", "mcp__tickets__daily", "tickets", "daily"),
    ]
