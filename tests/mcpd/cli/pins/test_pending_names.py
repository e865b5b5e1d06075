"""Held items whose names read as another's (``purge `` with a space at its end,
``purge`` whose last letter is the Cyrillic U+0435): ``mcpd tools --pending`` and
``mcpd approve`` show each name quoted and escaped where it is not plain, beside the
name agents know it by, and approve one by the name as shown, through a running
daemon."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.support.clients.agent import connect, running
from tests.support.daemons.pins import TOOLS_CHANGED, Changing, cli, config, relist

OBJ = {"type": "object"}
CYRILLIC = "purg\u0435"


def tool(name: str, description: str) -> dict[str, object]:
    return {"name": name, "description": description, "inputSchema": OBJ}


async def test_look_alike_names_are_shown_apart_and_approved_as_shown(tmp_path: Path) -> None:
    server = Changing(tmp_path)
    server.write({"tools": [tool("purge", "Purge the cache.")]})
    cfg = config(tmp_path, {"tickets": server.config()}, on_new_item="hold")
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            sock = daemon.socket_path
            async with connect(sock, modern=False) as agent:
                await agent.initialize()
                server.write(
                    {
                        "tools": [
                            tool("purge", "Purge the cache."),
                            tool("purge ", "Purge everything."),
                            tool(CYRILLIC, "Purge everything too."),
                        ]
                    }
                )
                await relist(agent, agent, (TOOLS_CHANGED,))
                listed = {t["_meta"]["mcpd/originalName"]: t["name"] for t in await agent.tools()}
                code, out, err = await cli(sock, "tools", "--pending")
                assert code == 0, err
                rows = [line for line in out.splitlines() if line.startswith("tickets ")]
                assert len(rows) == 2, out
                spaced = next(r for r in rows if "'purge '" in r)
                cyrillic = next(r for r in rows if "'purg\\u0435'" in r)
                theirs = listed[CYRILLIC]
                assert listed["purge "] in spaced and theirs in cyrillic
                code, out, err = await cli(sock, "approve", "tickets", "purg\\u0435", "--yes")
                assert code == 0, err
                assert f"tool 'purg\\u0435' ({theirs}) of tickets" in out
                assert "approved: tool 'purg\\u0435'" in out
                code, out, err = await cli(sock, "approve", "tickets", "purge")
                assert code != 0
                assert "waits for approval" in err and "'purge '" in err


async def test_a_name_typed_as_another_is_shown_approves_that_one_alone(tmp_path: Path) -> None:
    """One tool is named ``purg\\u0435`` as typed (a backslash and five letters), another
    ``purge`` with the Cyrillic letter, which is shown so: naming the first approves it
    and not the look-alike, which is approved by its shown form, quotes and all, its
    name in the diff escaped."""
    typed = "purg\\u0435"
    server = Changing(tmp_path)
    server.write({"tools": [tool("read", "Read.")]})
    cfg = config(tmp_path, {"tickets": server.config()}, on_new_item="hold")
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            sock = daemon.socket_path
            async with connect(sock, modern=False) as agent:
                await agent.initialize()
                both = [tool(typed, "Wanted."), tool(CYRILLIC, "Deletes everything.")]
                server.write({"tools": [tool("read", "Read."), *both]})
                await relist(agent, agent, (TOOLS_CHANGED,))
                code, out, err = await cli(sock, "approve", "tickets", typed, "--yes")
                assert code == 0, err
                assert out.count("approved: ") == 1 and f"approved: tool {typed}\n" in out, out
                code, out, err = await cli(sock, "tools", "--pending")
                assert code == 0, err
                rows = [line for line in out.splitlines() if line.startswith("tickets ")]
                assert len(rows) == 1 and "'purg\\u0435'" in rows[0], out
                code, out, err = await cli(sock, "approve", "tickets", f"'{typed}'", "--yes")
                assert code == 0, err
                assert "+name: 'purg\\u0435'" in out and CYRILLIC not in out, out
                assert "approved: tool 'purg\\u0435'" in out
