"""A server that could not be started for want of something outside its config (a path
it is granted, not there yet) is started again by a reload, at once, rather than at its
next try, which may be a minute away; the servers that run are left as they are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.daemons.sandboxed import Served, agent_of, hostile, serving, steady, wait_ready

pytestmark = pytest.mark.timeout(120)


async def failed(d: Served, alias: str) -> dict[str, Any]:
    """The status once ``alias`` has failed to start."""
    with trio.fail_after(30):
        while True:
            rows = await d.status()
            if rows[alias]["last_error"]:
                return rows
            await trio.sleep(0.05)


async def test_a_reload_starts_a_server_whose_missing_grant_was_made(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    servers = {"files": hostile(write=[str(notes)]), "steady": steady()}
    # Its next try is a minute away: only the reload can start it within the test.
    with serving(tmp_path, servers, backoff_base=60.0, backoff_cap=60.0) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "steady")
            rows = await failed(d, "files")
            assert f"servers.files.write[0]: {notes} does not exist" in rows["files"]["last_error"]
            assert rows["files"]["state"] == "failed"
            steady_pid = rows["steady"]["pid"]
            notes.mkdir()
            report = await agent.result("mcpd/reload")
            assert report["changed"] == ["files"]
            assert report["why"] == {"files": "it could not be started, and is tried again at once"}
            assert "steady" in report["unchanged"]
            await wait_ready(agent, "files", timeout=10)
            assert (await d.status())["steady"]["pid"] == steady_pid
            # A reload that finds every server as it was touches none.
            again = await agent.result("mcpd/reload")
            assert again["changed"] == [] and "files" in again["unchanged"]
