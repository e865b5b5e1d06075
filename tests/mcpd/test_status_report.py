"""What the daemon says of itself, whole and as an agent of one profile reads it, and
what of its servers only the daemon's own user and root read."""

from __future__ import annotations

import json
import os
import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.clients.daemon_http import socket_get
from tests.support.daemons.supervision import wait_state
from tests.support.system.peer_probe import PEER_HTTP, PEER_PROBE
from tests.support.system.peer_user import needs_root, peer_uid, run_as, shared_dir, socket_open_to
from tests.support.system.procs import scripted

WHOLE_DAEMON = [
    "version",
    "pid",
    "socket",
    "config",
    "uptime_s",
    "connections",
    "tools",
    "prompts",
    "resources",
    "max_tools",
    "summary",
    "state_file",
    "unsaved",
    "reload_refused",
    "warnings",
    "held",
    "definition_changes",
    "findings",
    "http",
]
PROFILE_DAEMON = [
    "version",
    "profile",
    "uptime_s",
    "connections",
    "tools",
    "prompts",
    "resources",
    "max_tools",
    "summary",
    "warnings",
]
# A stdio server's row, started at once, as its owner reads it.
STDIO_ROW = [
    "alias",
    "transport",
    "state",
    "era",
    "protocol_version",
    "server_info",
    "list_cache_scope",
    "tools",
    "since",
    "last_error",
    "retry_at",
    "restarts",
    "breaker",
    "calls",
    "errors",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "inflight",
    "waiting",
    "stderr",
    "dropped_tools",
    "pid",
    "held_back",
    "sandbox",
    "secrets_masked",
    "prompts",
    "resources",
    "resource_templates",
    "dropped_prompts",
    "dropped_resources",
    "dropped_resource_templates",
    "cut",
    "held",
    "definition_changes",
    "findings",
    "forgotten_names",
    "warnings",
]


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


async def test_the_whole_status_and_a_profiles_status(tmp_path: Path) -> None:
    cfg = make_config(
        tmp_path,
        {"alpha": server("--tools", "2"), "beta": server("--tools", "3")},
        profiles={"default": {}, "one": {"servers": ["alpha"]}},
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            whole = await agent.result("mcpd/status")
            await agent.use_profile("one")
            scoped = await agent.result("mcpd/status")
            history = daemon.history()
            metrics = daemon.metrics()
    top = whole["daemon"]
    assert (top["pid"], top["socket"], top["tools"]) == (os.getpid(), daemon.socket_path, 5)
    assert top["state_file"] == daemon.state.path and top["uptime_s"] >= 0
    assert [s["alias"] for s in whole["servers"]] == ["alpha", "beta"]
    assert all(datetime.fromisoformat(s["since"]) for s in whole["servers"])
    assert {p["name"] for p in whole["profiles"]} == {"default", "one"}
    mine = scoped["daemon"]
    assert mine["profile"] == "one" and mine["tools"] == 2
    assert not {"pid", "socket", "config", "state_file", "http"} & set(mine)
    assert [s["alias"] for s in scoped["servers"]] == ["alpha"]
    assert [p["name"] for p in scoped["profiles"]] == ["one"]
    assert (top["summary"], mine["summary"]) == ("2 servers: 2 ready", "1 server: 1 ready")
    # The keys a script reads, in the order they are written; none a server lacks. A
    # modern agent's result carries its resultType first, as each of mcpd's own does.
    assert list(whole) == ["resultType", "daemon", "servers", "profiles", "approvals", "audit"]
    assert list(scoped) == ["resultType", "daemon", "servers", "profiles"]
    assert whole["resultType"] == scoped["resultType"] == "complete"
    assert list(top) == WHOLE_DAEMON
    assert list(mine) == PROFILE_DAEMON
    assert all(list(s) == STDIO_ROW for s in [*whole["servers"], *scoped["servers"]])
    assert "beta" not in str(scoped["profiles"])
    assert [h.server for h in history] == ["alpha", "beta"]
    assert 'server="alpha"' in metrics and 'server="beta"' in metrics


# What a server that exits at once writes on stderr as it goes: it stays down.
LAST_WORDS = "last-words-of-broken"


@needs_root
async def test_only_the_owner_reads_a_servers_stderr_pid_and_home(tmp_path: Path) -> None:
    """Another user on the daemon's socket, in the default profile (every server), reads
    each server's row without what the server wrote on stderr (what any agent sent it
    may be there), its pid or its home in the state directory; the owner reads them,
    also in a profile of its choosing."""
    uid = peer_uid()
    shared = shared_dir()
    says = f"import sys; print({LAST_WORDS!r}, file=sys.stderr); sys.exit(3)"
    cfg = make_config(
        tmp_path,
        {"steady": server(), "broken": {"command": sys.executable, "args": ["-c", says]}},
        profiles={"one": {"servers": ["steady", "broken"]}},
        **socket_open_to(uid, shared),
        state_dir=str(tmp_path / "state"),
        backoff_base=30.0,
        backoff_cap=60.0,
    )
    reads = [["GET", "/status", {}, ""], ["GET", "/", {}, ""]]
    try:
        with trio.fail_after(60):
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                await wait_state(agent, "steady", "ready")
                await wait_state(agent, "broken", "failed")
                sock = daemon.socket_path
                line = await run_as(uid, PEER_PROBE, sock, json.dumps([["mcpd/status", {}]]))
                http = await run_as(uid, PEER_HTTP, sock, json.dumps(reads))
                owners = {
                    "mcpd/status": await agent.result("mcpd/status"),
                    "GET /status": json.loads(await socket_get(sock, "/status")),
                }
                owners_page = (await socket_get(sock, "/")).decode()
                await agent.use_profile("one")
                owners["in a profile"] = await agent.result("mcpd/status")
    finally:
        shutil.rmtree(shared)
    status, page = (json.loads(reply) for reply in http.decode().splitlines())
    theirs = {
        "mcpd/status": json.loads(line.decode().splitlines()[0])["result"],
        "GET /status": json.loads(status[1]),
    }
    home = str(tmp_path / "state")
    for where, view in owners.items():
        rows = {s["alias"]: s for s in view["servers"]}
        assert isinstance(rows["steady"]["pid"], int), where
        assert rows["steady"]["sandbox"]["home"].startswith(home), where
        assert LAST_WORDS in rows["broken"]["stderr"], where
    assert LAST_WORDS in owners_page
    pid = {s["alias"]: s for s in owners["mcpd/status"]["servers"]}["steady"]["pid"]
    assert f"pid {pid}" in owners_page
    for where, view in theirs.items():
        rows = {s["alias"]: s for s in view["servers"]}
        assert set(rows) == {"broken", "steady"}, where
        for row in rows.values():
            assert not {"stderr", "pid"} & set(row), (where, row)
            assert "home" not in row["sandbox"] and row["sandbox"]["level"], (where, row)
        assert LAST_WORDS not in json.dumps(view) and home not in json.dumps(view), where
    assert page[0] == 200 and "steady" in page[1] and "broken" in page[1]
    assert LAST_WORDS not in page[1] and f"pid {pid}" not in page[1] and home not in page[1]
