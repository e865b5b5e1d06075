"""A profile's own socket holds the daemon's own user to that profile for what a
shared server writes too, in a running daemon: an agent there, of the daemon's own
user, is told none of the server's log messages (here, as often, another profile's
agent's call arguments), its ``logging/setLevel`` does not make the server more
verbose, and its status (``mcpd/status``, ``GET /status``) gives the server's row
without stderr, pid and home, as another user reads it. On the daemon's socket the
same user gets them all."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.clients.daemon_http import socket_get
from tests.support.clients.log_messages import LOGGING, SECRET, log_message

LIMIT = 60


async def test_an_agent_on_a_profile_socket_hears_nothing_a_shared_server_logged(
    tmp_path: Path,
) -> None:
    held = tmp_path / "held.sock"
    cfg = make_config(
        tmp_path,
        {"notes": {"command": sys.executable, "args": [LOGGING]}},
        profiles={"held": {"servers": ["notes"], "socket": str(held)}},
        state_dir=str(tmp_path / "state"),
    )
    with trio.fail_after(LIMIT):
        async with (
            running(cfg) as daemon,
            connect(daemon.socket_path, modern=False) as owner,
            connect(str(held), modern=False) as profiled,
        ):
            await owner.initialize()
            await profiled.initialize()
            await owner.result("logging/setLevel", {"level": "notice"})
            _, seen = await log_message(owner, 0, "level set to notice")
            assert await profiled.result("logging/setLevel", {"level": "debug"}) == {}
            # The owner's next level is the one the server is asked for next: the
            # profile socket's debug is not among what agents want of it.
            await owner.result("logging/setLevel", {"level": "info"})
            asked, seen = await log_message(owner, seen, "level set to")
            assert asked["data"] == "level set to info", asked
            reply = await owner.call("mcp__notes__note", {"token": SECRET})
            assert reply["content"][0]["text"] == "noted", reply
            await log_message(owner, seen, SECRET)  # the owner hears its server
            await profiled.result("ping")  # answered: all it was told has come
            heard = profiled.notifications
            assert SECRET not in json.dumps(heard), f"the profile's agent heard the call: {heard}"
            assert [m for m in heard if m["method"] == "notifications/message"] == [], heard
            [mine] = (await owner.result("mcpd/status"))["servers"]
            [theirs] = (await profiled.result("mcpd/status"))["servers"]
            assert "pid" in mine, mine
            assert "pid" not in theirs and "stderr" not in theirs, theirs
            [paged] = json.loads(await socket_get(str(held), "/status"))["servers"]
            assert [key for key in ("pid", "stderr") if key in paged] == [], paged
