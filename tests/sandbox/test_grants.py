"""A grant that names the whole machine without saying ``/``: a link to ``/`` where the
user meant a folder of notes. No grant gives back everything the sandbox hides: the
server does not start, and its outage names the grant and why (not bubblewrap's
failure to lay the link over itself)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.daemons.sandboxed import (
    HOSTILE,
    Served,
    agent_of,
    hostile,
    serving,
    steady,
    text,
    wait_ready,
)
from tests.support.system import bubblewrap

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _sandbox_works() -> None:
    bubblewrap.require()


async def settled(d: Served, alias: str) -> dict[str, Any]:
    """The status once the server is ready or has failed to start."""
    with trio.fail_after(30):
        while True:
            rows = await d.status()
            if rows[alias]["state"] == "ready" or rows[alias]["last_error"]:
                return rows
            await trio.sleep(0.05)


async def test_a_grant_that_resolves_to_the_root_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "notes"
    link.symlink_to("/")
    runtime = sorted({sys.prefix, sys.base_prefix, str(Path(HOSTILE).parent)})
    strict = hostile(sandbox="strict", read=runtime, write=[str(link)])
    with serving(tmp_path, {"hostile": strict, "steady": steady()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "steady")
            rows = await settled(d, "hostile")
            assert rows["hostile"]["state"] != "ready"
            assert f"servers.hostile.write[0]: {link} is /" in rows["hostile"]["last_error"]
            assert text(await agent.call("mcp__steady__tool0", {"text": "a"})) == "tool0:a"
