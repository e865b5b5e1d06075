"""What a sandbox hides stays hidden when the path to it changes: a server cannot move
the directories above mcpd's state or a credential store (which would take them out
from under what its next sandbox hides)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.support import bubblewrap
from tests.support.agent import Agent
from tests.support.sandbox import (
    ENDPOINT_TOKEN,
    Served,
    agent_of,
    hostile,
    serving,
    steady,
    text,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _sandbox_works() -> None:
    bubblewrap.require()


async def call(agent: Agent, tool: str, **arguments: object) -> str:
    return text(await agent.call(f"mcp__hostile__{tool}", arguments))


def state_in(where: Path) -> Path:
    """A state directory at ``where`` holding the endpoint token."""
    where.mkdir(parents=True)
    (where / "token").write_text(ENDPOINT_TOKEN + "\n")
    return where


async def restarted(d: Served, agent: Agent) -> None:
    """The hostile server made to exit, and started again by mcpd."""
    before = (await d.status())["hostile"]["restarts"]
    await agent.call("mcp__hostile__quit", {})  # an error: it dies mid-call
    with trio.fail_after(30):
        while (await d.status())["hostile"]["restarts"] <= before:
            await trio.sleep(0.05)
    await wait_ready(agent, "hostile")


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
