"""Real servers nobody here wrote work in their sandboxes, at the default and at the
strict level: the npm filesystem server with one granted folder (it reads and writes
there and is refused outside it), mcp-server-git on a granted repository, and
server-everything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.daemons.sandboxed import text, wait_ready
from tests.support.hosts.peers import NODE_BIN, node_tool

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

NODE_MODULES = str(NODE_BIN.parent)  # a symlink here: granted as written
PYTHON = sorted({sys.prefix, sys.base_prefix})


def strict(**grants: Any) -> dict[str, Any]:
    return {"sandbox": "strict", **grants}


async def call(agent: Agent, name: str, **arguments: Any) -> dict[str, Any]:
    return await agent.call(name, arguments)


@pytest.mark.parametrize("level", ["default", "strict"])
async def test_the_filesystem_server_works_in_its_granted_folder_only(
    tmp_path: Path, level: str
) -> None:
    folder, outside = tmp_path / "granted", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (folder / "hello.txt").write_text("hello from a file")
    (outside / "secret.txt").write_text("not for it")
    server: dict[str, Any] = {
        "command": node_tool("mcp-server-filesystem"),
        "args": [str(folder)],
        "env": {"PATH": f"{NODE_BIN}:/usr/bin:/bin"},
    }
    if level == "strict":
        server |= strict(read=[NODE_MODULES], write=[str(folder)])
    cfg = make_config(tmp_path, {"files": server})
    with trio.fail_after(120):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            await wait_ready(agent, "files", timeout=90)
            rows = {s["alias"]: s for s in (await agent.result("mcpd/status"))["servers"]}
            assert rows["files"]["sandbox"]["level"] == level
            assert rows["files"]["sandbox"]["unprotected"] is None
            got = await call(agent, "mcp__files__read_text_file", path=str(folder / "hello.txt"))
            assert "hello from a file" in text(got)
            wrote = await call(
                agent, "mcp__files__write_file", path=str(folder / "new.txt"), content="written"
            )
            assert not wrote.get("isError"), wrote
            assert (folder / "new.txt").read_text() == "written"
            refused = await call(
                agent, "mcp__files__read_text_file", path=str(outside / "secret.txt")
            )
            assert refused["isError"] is True
            assert "not for it" not in text(refused)


@pytest.mark.parametrize("level", ["default", "strict"])
async def test_the_git_server_works_on_its_granted_repository(tmp_path: Path, level: str) -> None:
    command = Path(sys.executable).with_name("mcp-server-git")
    if not command.exists():
        pytest.skip("mcp-server-git is not installed (pip install -e '.[test]')")
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("first\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "the first commit"], check=True)
    (repo / "b.txt").write_text("second\n")
    server: dict[str, Any] = {"command": str(command), "args": ["--repository", str(repo)]}
    if level == "strict":
        server |= strict(read=PYTHON, write=[str(repo)])
    cfg = make_config(tmp_path, {"git": server})
    with trio.fail_after(120):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            await wait_ready(agent, "git", timeout=90)
            log = await call(agent, "mcp__git__git_log", repo_path=str(repo))
            assert "the first commit" in text(log), log
            status = await call(agent, "mcp__git__git_status", repo_path=str(repo))
            assert "b.txt" in text(status), status
            added = await call(agent, "mcp__git__git_add", repo_path=str(repo), files=["b.txt"])
            assert not added.get("isError"), added
            staged = subprocess.run(
                [*git, "diff", "--cached", "--name-only"], capture_output=True, text=True
            )
            assert staged.stdout.split() == ["b.txt"]


@pytest.mark.parametrize("level", ["default", "strict"])
async def test_server_everything_works(tmp_path: Path, level: str) -> None:
    server: dict[str, Any] = {
        "command": node_tool("mcp-server-everything"),
        "args": ["stdio"],
        "env": {"PATH": f"{NODE_BIN}:/usr/bin:/bin"},
    }
    if level == "strict":
        server |= strict(read=[NODE_MODULES], network=False)
    cfg = make_config(tmp_path, {"everything": server})
    with trio.fail_after(120):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            await wait_ready(agent, "everything", timeout=90)
            got = await call(agent, "mcp__everything__echo", message="hi there")
            assert text(got) == "Echo: hi there"
            got = await call(agent, "mcp__everything__get-sum", a=2, b=3)
            assert "5" in text(got)
