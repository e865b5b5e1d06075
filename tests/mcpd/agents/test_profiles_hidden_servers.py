"""A profile is a boundary for what the servers are doing too: an agent on a narrow
profile hears nothing of a server it does not have, even one that is down, with its
error in words the server chose: not in its instructions' outages, not in the states
beside its tool list, not in the answer to a call by that server's name."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.supervision import server, text, wait_state
from tests.support.system.procs import forging

# What the hidden server answers initialize with, which only who may see it is told.
SECRET = "vault at 10.0.0.7 refused the key"


async def test_a_narrow_profile_hears_nothing_of_a_hidden_server_down(tmp_path: Path) -> None:
    cfg = make_config(
        tmp_path,
        {"vault": forging("--init-error", SECRET), "notes": server("--names", "search")},
        profiles={"narrow": {"servers": ["notes"]}},
        backoff_base=30.0,
        backoff_cap=30.0,
    )
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as owner:
            await wait_state(owner, "vault", "failed")
            async with connect(daemon.socket_path) as agent:
                await agent.use_profile("narrow")
                said = (await agent.result("server/discover"))["instructions"]
                assert "vault" not in said and "Current outages" not in said
                listed = await agent.result("tools/list")
                assert [s["server"] for s in listed["_meta"]["mcpd/servers"]] == ["notes"]
                called = await agent.call("mcp__vault__open")
                assert called["isError"] and "Unknown tool 'mcp__vault__open'" in text(called)
                assert "unavailable" not in text(called) and "10.0.0.7" not in text(called)
            # The owner, in the default profile, is told all of it: the profile hid it.
            said = (await owner.result("server/discover"))["instructions"]
            assert "Current outages: The tool server 'vault' is unavailable" in said
            listed = await owner.result("tools/list")
            assert [s["server"] for s in listed["_meta"]["mcpd/servers"]] == ["notes", "vault"]
            called = await owner.call("mcp__vault__open")
            assert "is listed now. The tool server 'vault' is unavailable" in text(called)
