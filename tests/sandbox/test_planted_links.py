"""What a sandboxed server plants at the names every sandbox hides cannot keep the
other servers from starting: a link at a credential store's free name pointed at the
system hides nothing there (and is named), a store the user keeps elsewhere through
a link stays hidden however a server repoints or removes the link, or points its own
working directory into it, and a file the server moves where mcpd cannot name it stops
no server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import Agent
from tests.support.daemons.sandboxed import (
    Served,
    added,
    agent_of,
    hostile,
    restarted,
    serving,
    text,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)
AWS_KEY = "aws_secret_access_key = planted-5d1e\n"


async def call(agent: Agent, tool: str, **arguments: object) -> str:
    return text(await agent.call(f"mcp__hostile__{tool}", arguments))


async def warnings(agent: Agent) -> list[str]:
    status = await agent.result("mcpd/status")
    return list(status["daemon"]["warnings"])


async def test_a_servers_links_at_stores_names_hide_nothing_the_servers_need(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "data" / "aws"  # the user's ~/.aws, kept on another disk
    keys.mkdir(parents=True)
    (keys / "credentials").write_text(AWS_KEY)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".aws").symlink_to(keys)
    with serving(tmp_path, {"hostile": hostile()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile")
            kube, aws = d.home / ".kube", d.home / ".aws"
            for link in (kube, aws):
                got = await call(agent, "relink", path=str(link), to="/usr")
                assert got.startswith("ok:"), got
            # It starts again: the system is not hidden from it.
            await restarted(d, agent)
            got = await call(agent, "read_file", path=str(keys / "credentials"))
            assert got.startswith("refused: FileNotFoundError"), got
            said = await warnings(agent)
            for link in (kube, aws):
                named = f"{link} is a symbolic link to /usr, which is the root or a directory"
                assert any(w.startswith(named) for w in said), said
            # Nor does removing the user's link show what it led to.
            got = await call(agent, "remove", path=str(aws))
            assert got.startswith("ok:"), got
            await restarted(d, agent)
            got = await call(agent, "read_file", path=str(keys / "credentials"))
            assert got.startswith("refused: FileNotFoundError"), got


async def test_a_file_a_server_moves_where_mcpd_cannot_name_it_stops_no_server(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, {"hostile": hostile()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile")
            netrc = d.home / ".netrc"  # not there as it started: not hidden from it
            got = await call(agent, "write_file", path=str(netrc), text="machine x\n")
            assert got.startswith("ok:"), got
            await added(d, agent, "late", hostile())  # which mcpd hides it from
            for tool, arguments in (
                ("hard_link", {"path": str(netrc), "to": str(d.home / ".cache-x")}),
                ("remove", {"path": str(netrc)}),
            ):
                got = await call(agent, tool, **arguments)
                assert got.startswith("ok:"), got
            await added(d, agent, "later", hostile())
            said = await warnings(agent)
            lost = f"{netrc} was removed while the file it named keeps another name"
            assert any(w.startswith(lost) for w in said), said
            assert (await d.status())["late"]["restarts"] == 0


async def started_again(d: Served, agent: Agent) -> dict[str, Any]:
    """The hostile server made to exit; its status once mcpd has started it again, or
    has refused to."""
    before = (await d.status())["hostile"]["restarts"]
    await agent.call("mcp__hostile__quit", {})  # an error: it dies mid-call
    with trio.fail_after(30):
        while True:
            row = (await d.status())["hostile"]
            if "cannot start in its sandbox" in (row["last_error"] or ""):
                return row
            if row["state"] == "ready" and row["restarts"] > before:
                return row
            await trio.sleep(0.05)


async def test_a_server_that_points_its_working_directory_into_a_linked_store_is_refused(
    tmp_path: Path,
) -> None:
    keys = tmp_path / "dotfiles" / "aws"  # the user's ~/.aws, kept in a dotfiles checkout
    keys.mkdir(parents=True)
    (keys / "credentials").write_text(AWS_KEY)
    home = tmp_path / "home"
    project = home / "proj"
    project.mkdir(parents=True)
    (home / ".aws").symlink_to(keys)
    with serving(tmp_path, {"hostile": hostile(cwd=str(project))}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile")
            got = await call(agent, "read_file", path=str(keys / "credentials"))
            assert got.startswith("refused: FileNotFoundError"), got
            # Its working directory swapped for a link into the store.
            got = await call(agent, "rename", path=str(project), to=str(home / ".proj-keep"))
            assert got.startswith("ok:"), got
            got = await call(agent, "relink", path=str(project), to=str(keys))
            assert got.startswith("ok:"), got
            row = await started_again(d, agent)
            if row["state"] == "ready":  # what it would read, were it started
                got = await call(agent, "read_file", path=str(home / ".aws" / "credentials"))
                assert not got.startswith("ok:"), got
            said = row["last_error"]
            assert f"{home / '.aws'} is a symbolic link to {keys}" in said, said
            assert f"the working directory of servers.hostile ({project})" in said, said
            # Another server started after does not see the store either.
            await added(d, agent, "late", hostile())
            got = text(
                await agent.call(
                    "mcp__late__read_file", {"path": str(home / ".aws" / "credentials")}
                )
            )
            assert got.startswith("refused: FileNotFoundError"), got
