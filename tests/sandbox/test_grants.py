"""A grant that names the whole machine without saying ``/``: a link to ``/`` where the
user meant a folder of notes. No grant gives back everything the sandbox hides: the
server does not start, and its outage names the grant and why (not bubblewrap's
failure to lay the link over itself)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    RUNTIME,
    agent_of,
    hostile,
    serving,
    settled,
    steady,
    text,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)


async def test_a_grant_that_resolves_to_the_root_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "notes"
    link.symlink_to("/")
    strict = hostile(sandbox="strict", read=RUNTIME, write=[str(link)])
    with serving(tmp_path, {"hostile": strict, "steady": steady()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "steady")
            rows = await settled(d, "hostile")
            assert rows["hostile"]["state"] != "ready"
            assert f"servers.hostile.write[0]: {link} is /" in rows["hostile"]["last_error"]
            assert text(await agent.call("mcp__steady__tool0", {"text": "a"})) == "tool0:a"
