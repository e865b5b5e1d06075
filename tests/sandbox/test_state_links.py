"""mcpd's state directory reached through a symbolic link in a directory a sandboxed
server may write: that server does not start, and its outage and mcpd's log name the
link and the state_dir to write instead; a server without a sandbox starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    agent_of,
    hostile,
    serving,
    settled,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)


async def test_a_server_that_could_repoint_the_link_to_mcpds_state_does_not_start(
    tmp_path: Path,
) -> None:
    (tmp_path / "local").symlink_to(tmp_path)  # the state is at tmp_path/state
    linked = tmp_path / "local" / "state"
    servers = {"hostile": hostile(), "open": hostile(sandbox="off")}
    with serving(tmp_path, servers, state_dir=str(linked)) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "open")
            rows = await settled(d, "hostile")
            assert rows["hostile"]["state"] != "ready"
            said = rows["hostile"]["last_error"]
            assert f"symbolic link {tmp_path / 'local'}" in said, said
            assert f'state_dir = "{tmp_path / "state"}"' in said, said
        said = f"symbolic link {tmp_path / 'local'}"
        assert said in await d.logged(said)
