"""What a sandbox hides stays hidden when the path to it changes: a server cannot move
the directories above mcpd's state or a credential store (which would take them out
from under what its next sandbox hides), a directory moved by someone without a
sandbox is hidden where it went, and a link pointed elsewhere neither shows what it
pointed to nor makes mcpd keep its state where the link now leads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.clients.agent import Agent
from tests.support.daemons.sandboxed import (
    ENDPOINT_TOKEN,
    RUNTIME,
    agent_of,
    hostile,
    restarted,
    serving,
    steady,
    text,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)
AWS_KEY = "aws_secret_access_key = planted-2b7c\n"


async def call(agent: Agent, tool: str, **arguments: object) -> str:
    return text(await agent.call(f"mcp__hostile__{tool}", arguments))


def state_in(where: Path) -> Path:
    """A state directory at ``where`` holding the endpoint token."""
    where.mkdir(parents=True)
    (where / "token").write_text(ENDPOINT_TOKEN + "\n")
    (where / "token").chmod(0o600)  # as mcpd writes it: one others could read is replaced
    return where


async def daemon_status(agent: Agent) -> dict[str, Any]:
    result: dict[str, Any] = await agent.result("mcpd/status")
    return result


async def test_a_server_cannot_move_the_directories_above_what_is_hidden(tmp_path: Path) -> None:
    state = state_in(tmp_path / "lib" / "mcpd")
    with serving(tmp_path, {"hostile": hostile(), "steady": steady()}, state_dir=str(state)) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            for above, to in ((tmp_path / "lib", "lib.moved"), (d.home, "home.moved")):
                got = await call(agent, "rename", path=str(above), to=str(tmp_path / to))
                assert got.startswith("refused: OSError: [Errno 16]"), got
            await restarted(d, agent)
            for path in (
                tmp_path / "lib" / "mcpd" / "token",
                tmp_path / "lib.moved" / "mcpd" / "token",
                tmp_path / "home.moved" / ".ssh" / "id_ed25519",
            ):
                got = await call(agent, "read_file", path=str(path))
                assert got.startswith("refused:"), got
            assert (state / "token").read_text() == ENDPOINT_TOKEN + "\n"


async def test_a_directory_moved_from_outside_is_hidden_where_it_went(tmp_path: Path) -> None:
    state = state_in(tmp_path / "lib" / "mcpd")
    with serving(tmp_path, {"hostile": hostile(), "steady": steady()}, state_dir=str(state)) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            # As the user, or a server without a sandbox, may.
            (tmp_path / "lib").rename(tmp_path / "lib.moved")
            (d.home / ".ssh").rename(d.home / "ssh.old")
            await restarted(d, agent)
            moved = tmp_path / "lib.moved" / "mcpd"
            got = await call(agent, "read_file", path=str(moved / "token"))
            assert got.startswith("refused: FileNotFoundError"), got
            got = await call(agent, "read_file", path=str(d.home / "ssh.old" / "id_ed25519"))
            assert got.startswith("refused: FileNotFoundError"), got
            warnings = (await daemon_status(agent))["daemon"]["warnings"]
            assert any(str(moved) in w for w in warnings), warnings
            assert any(str(d.home / "ssh.old") in w for w in warnings), warnings
            # Said in the log with the servers that were started while it was in place.
            said = f"{state} is not where it was: it is now at {moved}"
            assert said in await d.logged(said)


async def test_a_link_pointed_elsewhere_hides_nothing_less(tmp_path: Path) -> None:
    real = state_in(tmp_path / "real" / "mcpd")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    keys = tmp_path / "keys"  # the user's ~/.aws, kept elsewhere
    keys.mkdir()
    (keys / "credentials").write_text(AWS_KEY)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".aws").symlink_to(keys)
    # The links are pointed elsewhere by a server without a sandbox; one that could
    # repoint the state's from inside its own would not start (``test_state_links``):
    # this one sees the folder read-only.
    watcher = hostile(sandbox="strict", read=[*RUNTIME, str(tmp_path)])
    servers = {"hostile": watcher, "open": hostile(sandbox="off")}
    with serving(tmp_path, servers, state_dir=str(tmp_path / "link" / "mcpd")) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "open")
            decoy = tmp_path / "decoy"
            (decoy / "mcpd").mkdir(parents=True)
            for link in (tmp_path / "link", d.home / ".aws"):
                relink = {"path": str(link), "to": str(decoy)}
                got = text(await agent.call("mcp__open__relink", relink))
                assert got.startswith("ok:"), got
            await restarted(d, agent)
            for path in (real / "token", keys / "credentials"):
                got = await call(agent, "read_file", path=str(path))
                assert got.startswith("refused: FileNotFoundError"), got
            # mcpd keeps its state where it found it as it started, not where the link
            # now leads: the restarted server's home is made there too.
            home = (await d.status())["hostile"]["sandbox"]["home"]
            assert home == str(real / "homes" / "hostile")
            assert not (decoy / "mcpd" / "homes").exists()
