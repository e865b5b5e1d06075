"""An agent paging tools/list through a daemon while a reload adds a server: the
cursor it holds is refused, saying the list changed, and listing again from the start
gives every tool once; the agent never gets a page that skips or repeats tools."""

from __future__ import annotations

from pathlib import Path

import trio

from mcpd.config.loading.load import load
from tests.support.clients.agent import connect, running
from tests.support.daemons.reloading import toml_server, write_config


async def test_a_cursor_kept_across_a_reload_that_adds_a_server_is_refused(
    tmp_path: Path,
) -> None:
    path, sock = tmp_path / "mcpd.toml", tmp_path / "mcpd.sock"
    bravo = toml_server(tmp_path / "bravo.pid", "--tools", "4")
    write_config(path, sock, {"bravo": bravo}, "page_size = 2\n")
    with trio.fail_after(30):
        async with (
            running(load(path), str(path)) as daemon,
            connect(daemon.socket_path, modern=False) as agent,
        ):
            await agent.initialize()
            first = await agent.result("tools/list")
            assert [t["name"] for t in first["tools"]] == ["mcp__bravo__tool0", "mcp__bravo__tool1"]
            # A server whose tools sort before the page the agent already has.
            alpha = toml_server(tmp_path / "alpha.pid", "--tools", "2")
            write_config(path, sock, {"alpha": alpha, "bravo": bravo}, "page_size = 2\n")
            await daemon.reload()  # back once alpha's first start is through
            await agent.wait_notifications(1)
            stale = await agent.rpc("tools/list", {"cursor": first["nextCursor"]})
            assert "result" not in stale, (
                f"a page of a changed list: {[t['name'] for t in stale['result']['tools']]}"
            )
            assert stale["error"]["code"] == -32602
            assert "list that has changed since" in stale["error"]["message"]
            names = [t["name"] for t in await agent.tools()]
            assert names == [
                *(f"mcp__alpha__tool{i}" for i in range(2)),
                *(f"mcp__bravo__tool{i}" for i in range(4)),
            ]
