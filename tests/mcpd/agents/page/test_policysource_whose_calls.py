"""The latest calls on the status page, as another user let onto the socket reads them:
the calls of its own user's agents, none of the daemon's own user's (their pids,
programs, tools and outcomes are no more its to see than the audit log is); the
daemon's own user reads everyone's."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.clients.daemon_http import curl
from tests.support.system.peer_user import needs_root, peer_uid, run_as, shared_dir, socket_open_to
from tests.support.system.procs import scripted

LIMIT = 60

# Calls the tool (argv[2]) on the socket (argv[1]), then reads the page there; prints
# its pid and the page.
CALL_THEN_READ = """
import json, os, socket, sys
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
req = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
       "params": {"name": sys.argv[2], "arguments": {}, "_meta": meta}}
s.sendall(json.dumps(req).encode() + bytes([10]))
reply = s.makefile("rb").readline()
assert b'"result"' in reply, reply
s.close()
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"GET / HTTP/1.0\\r\\nHost: mcpd\\r\\n\\r\\n")
page = b""
while chunk := s.recv(65536):
    page += chunk
print(json.dumps({"pid": os.getpid(), "page": page.decode()}))
"""


def latest_calls(page: str) -> list[str]:
    """The rows of the page's latest calls, as their cells' text joined."""
    section = page.split("<h2>Latest calls</h2>", 1)[1].split("</table>", 1)[0]
    body = section.split("<tbody>", 1)[1]
    return [
        " | ".join(re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row))
        for row in re.findall(r"<tr>(.*?)</tr>", body)
    ]


@needs_root
async def test_another_user_sees_the_calls_of_its_own_user_only(tmp_path: Path) -> None:
    uid = peer_uid()
    shared = shared_dir()
    command, args = scripted("--names", "note")
    cfg = make_config(
        tmp_path,
        {"mail": {"command": command, "args": list(args)}},
        **socket_open_to(uid, shared),
        state_dir=str(tmp_path / "state"),
    )
    try:
        with trio.fail_after(LIMIT):
            async with running(cfg) as daemon:
                async with connect(daemon.socket_path) as agent:
                    await agent.call("mcp__mail__note", {})
                out = json.loads(
                    await run_as(uid, CALL_THEN_READ, daemon.socket_path, "mcp__mail__note")
                )
                theirs = latest_calls(out["page"])
                assert len(theirs) == 1, theirs
                assert f"pid {out['pid']} " in theirs[0] and f"uid {uid} " in theirs[0]
                assert f"pid {os.getpid()} " not in out["page"]
                # The daemon's own user reads both calls.
                everyone = latest_calls((await curl(daemon.socket_path, "/")).body.decode())
                assert len(everyone) == 2, everyone
                assert any(f"pid {os.getpid()} " in row for row in everyone)
    finally:
        shutil.rmtree(shared)
