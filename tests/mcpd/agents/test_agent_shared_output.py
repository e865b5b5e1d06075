"""What a shared server wrote on stderr reaches only agents that read what it writes for
every agent it serves: on a profile's own socket, even the daemon's own user is told an
outage (a call in flight as the server died, the instructions naming a server that
failed to start) without the server's last stderr line, which often carries another
profile's agent's arguments; on the daemon's socket the same user is told it."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.supervision import server, text, wait_state

LIMIT = 60
DYING = "Error: cannot open /home/alice/ledger-q3.csv"
NO_KEY = "Error: missing API_KEY"


async def test_an_agent_on_a_profile_socket_is_told_an_outage_without_the_stderr_line(
    tmp_path: Path,
) -> None:
    held = tmp_path / "held.sock"
    no_key = f"import sys; print({NO_KEY!r}, file=sys.stderr); sys.exit(3)"
    cfg = make_config(
        tmp_path,
        {
            "dies": server("--die-on-call", "--die-saying", DYING),
            "dies_too": server("--die-on-call", "--die-saying", DYING),
            "needs_key": {"command": sys.executable, "args": ["-c", no_key]},
        },
        profiles={"held": {"servers": ["dies", "dies_too", "needs_key"], "socket": str(held)}},
        backoff_base=30.0,
        backoff_cap=60.0,
    )
    with trio.fail_after(LIMIT):
        async with (
            running(cfg) as daemon,
            connect(daemon.socket_path) as owner,
            connect(str(held)) as profiled,
        ):
            await wait_state(owner, "dies", "ready")
            await wait_state(owner, "dies_too", "ready")
            await wait_state(owner, "needs_key", "failed")
            died = await profiled.call("mcp__dies__tool0")
            assert died["isError"] is True, died
            assert "stderr" not in died["_meta"]["mcpd/outage"], died
            assert DYING not in text(died), text(died)
            # The same user on the daemon's socket, its call in flight as a server
            # like it dies, is told the line.
            down = await owner.call("mcp__dies_too__tool0")
            assert down["_meta"]["mcpd/outage"]["stderr"] == DYING, down
            assert DYING in text(down), text(down)

            async with (
                connect(daemon.socket_path, modern=False) as legacy_owner,
                connect(str(held), modern=False) as legacy_profiled,
            ):
                theirs = (await legacy_profiled.initialize()).get("instructions", "")
                mine = (await legacy_owner.initialize()).get("instructions", "")
            assert "needs_key" in theirs and NO_KEY not in theirs, theirs
            assert NO_KEY in mine, mine
