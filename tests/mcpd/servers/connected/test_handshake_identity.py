"""What a server says of itself (its name, version and title) is shown in status, cut to
a few hundred characters and cleaned as descriptions are: a server whose name is 4 MB
long, in either era, leaves ``mcpd/status`` and ``/status`` small."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from mcpd.servers.connected.handshake import IDENTITY_CHARS
from tests.support.clients.agent import connect, make_config, running
from tests.support.clients.daemon_http import socket_get

# A stdio server in the era given as its argument, whose serverInfo is huge: for a
# modern one in the _meta of its discover result, for a legacy one in initialize's.
SERVER = r"""
import json, sys
modern = sys.argv[1] == "modern"
info = {"name": "big" + "n" * (4 << 20), "version": "1." + "9" * (1 << 20),
        "title": "Title\x1b[2K\rHIDDEN\u202e" + " t" * 1000}
def send(msg):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    rid, method = msg.get("id"), msg.get("method")
    if rid is None:
        continue
    if method == "server/discover" and modern:
        send({"id": rid, "result": {"resultType": "complete",
              "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
              "_meta": {"io.modelcontextprotocol/serverInfo": info}}})
    elif method == "initialize" and not modern:
        send({"id": rid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}}, "serverInfo": info}})
    elif method == "tools/list":
        send({"id": rid, "result": {"resultType": "complete", "tools": []}})
    else:
        send({"id": rid, "error": {"code": -32601, "message": "no " + str(method)}})
"""


async def test_a_servers_huge_identity_is_cut_and_cleaned_in_status(tmp_path: Path) -> None:
    script = tmp_path / "big_identity.py"
    script.write_text(SERVER)
    servers = {era: {"command": sys.executable, "args": [str(script), era]}
               for era in ("modern", "legacy")}  # fmt: skip
    cfg = make_config(tmp_path, servers)
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            status = await agent.result("mcpd/status")
            page = await socket_get(daemon.socket_path, "/status")
    rows = {row["alias"]: row for row in status["servers"]}
    assert {alias: row["era"] for alias, row in rows.items()} == {
        "modern": "modern",
        "legacy": "legacy",
    }
    for alias, row in rows.items():
        info = row["server_info"]
        assert all(len(value) <= IDENTITY_CHARS for value in info.values()), alias
        assert info["name"].startswith("bignnn") and info["name"].endswith("...")
        assert info["version"].startswith("1.999")
        assert info["title"].startswith("Title HIDDEN t t"), info["title"]
    assert len(json.dumps(status)) < 16_000
    assert len(page) < 16_000
