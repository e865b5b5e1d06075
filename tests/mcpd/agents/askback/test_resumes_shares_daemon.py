"""The rounds kept for modern agents' retries, through a running daemon that lets
another local user's agents in: that user's agent calling a tool that asks for input
again and again, never retrying, forgets its own rounds past its share, and the daemon's
own user's agent, whose person is still answering, continues its call."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.system.peer_user import needs_root, peer_uid, run_as, shared_dir, socket_open_to

SHEDDING = str(Path(__file__).parents[3] / "support" / "asking" / "shedding_server.py")
LIMIT = 60
KEPT = 16  # the rounds all agents may have kept at once, in this test
FLOOD = 3 * KEPT

# The other user's agent (2026-07-28): calls the tool ``heavy`` FLOOD times, on one
# connection, and prints how many answers asked for input.
OTHER_AGENT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rwb")
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "other-user", "version": "0"}}
asked = 0
for rid in range(int(sys.argv[2])):
    params = {"name": "mcp__s__heavy", "arguments": {"size": 10}, "_meta": meta}
    req = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
    f.write(json.dumps(req).encode() + bytes([10]))
    f.flush()
    reply = json.loads(f.readline())
    asked += reply.get("result", {}).get("resultType") == "input_required"
print(asked, flush=True)
"""


@needs_root
async def test_another_users_rounds_do_not_push_out_the_owners(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mcpd.agents.askback.resumes.KEPT_AT_MOST", KEPT)
    uid = peer_uid()
    shared = shared_dir()
    cfg = make_config(
        tmp_path,
        {"s": {"command": sys.executable, "args": [SHEDDING]}},
        **socket_open_to(uid, shared),
        state_dir=str(tmp_path / "state"),
    )
    try:
        with trio.fail_after(LIMIT):
            async with running(cfg) as daemon, connect(daemon.socket_path) as owner:
                params = {"name": "mcp__s__heavy", "arguments": {"size": 12}}
                first = await owner.result("tools/call", params)
                assert first["resultType"] == "input_required", first
                out = await run_as(uid, OTHER_AGENT, daemon.socket_path, str(FLOOD))
                assert json.loads(out) == FLOOD, out
                state = {"requestState": first["requestState"]}
                done = await owner.result("tools/call", {**params, **state})
        assert done["content"] == [{"type": "text", "text": "brought back 12 bytes of state"}]
    finally:
        shutil.rmtree(shared)
