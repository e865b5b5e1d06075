"""A server that points its own grant at mcpd's state directory, or has a sibling do
it, and exits, is not started again with the state bound over the cover that hides
it: its start is refused, naming the grant, where it now leads and why, in ``mcpd
status`` and the journal, while every other server goes on answering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.clients.agent import Agent
from tests.support.daemons.sandboxed import (
    ENDPOINT_TOKEN,
    RUNTIME,
    Served,
    agent_of,
    call,
    hostile,
    serving,
    started_again,
    steady,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)


async def shown_nothing_of(d: Served, agent: Agent, alias: str, state: Path) -> dict[str, Any]:
    """``alias`` made to exit; were it started again, it could not read the state's
    token. Its status."""
    row = await started_again(d, agent, alias)
    if row["state"] in ("ready", "degraded"):
        # mcpd masks the token in what the server answers: that it read it is enough.
        got = await call(agent, alias, "read_file", path=str(state / "token"))
        assert not got.startswith("ok:"), got
    return row


def said_of(row: dict[str, Any], alias: str, key: str, grant: Path, state: Path) -> str:
    said: str = row["last_error"]
    lead = f"servers.{alias}.{key}: {grant} leads to {state}, which is {state}, mcpd's own"
    assert lead in said, said
    return lead


async def test_a_server_that_repoints_its_grant_at_the_state_is_not_started_with_it(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "home" / "notes"  # the user's notes, kept elsewhere
    (tmp_path / "data" / "notes").mkdir(parents=True)
    notes.parent.mkdir(parents=True)
    notes.symlink_to(tmp_path / "data" / "notes")
    servers = {"hostile": hostile(write=[str(notes)]), "steady": steady()}
    with serving(tmp_path, servers) as d:
        state = tmp_path / "state"
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            got = await call(agent, "hostile", "relink", path=str(notes), to=str(state))
            assert got.startswith("ok:"), got
            row = await shown_nothing_of(d, agent, "hostile", state)
            lead = said_of(row, "hostile", "write[0]", notes, state)
            assert lead in await d.logged(lead)
            assert await call(agent, "steady", "tool0", text="a") == "tool0:a"
            assert (state / "token").read_text() == ENDPOINT_TOKEN + "\n"


async def test_a_strict_servers_grant_repointed_by_a_sibling_is_not_bound(
    tmp_path: Path,
) -> None:
    project = tmp_path / "proj"
    notes = project / "notes"
    notes.mkdir(parents=True)
    servers = {
        "strict": hostile(sandbox="strict", read=RUNTIME, write=[str(notes)]),
        "sibling": hostile(),
        "steady": steady(),
    }
    with serving(tmp_path, servers) as d:
        state = tmp_path / "state"
        async with agent_of(d) as agent:
            await wait_ready(agent, "strict", "sibling", "steady")
            # The grant is a mount point in the strict sandbox; the folder above it is
            # not, and the sibling sees it as its user does.
            moved = {"path": str(project), "to": str(tmp_path / "proj.x")}
            for tool, arguments in (
                ("rename", moved),
                ("mkdir", {"path": str(project)}),
                ("relink", {"path": str(notes), "to": str(state)}),
            ):
                got = await call(agent, "sibling", tool, **arguments)
                assert got.startswith("ok:"), got
            row = await shown_nothing_of(d, agent, "strict", state)
            lead = said_of(row, "strict", "write[0]", notes, state)
            assert lead in await d.logged(lead)
            assert await call(agent, "steady", "tool0", text="a") == "tool0:a"
