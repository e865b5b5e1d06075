"""A server's result that gives ``resultType`` twice, through a running daemon: the
agent gets it written with the one mcpd read (the last), so that a reader keeping the
first key reads the same kind of result as mcpd did, never an ``input_required`` mcpd
neither cleaned nor marked, nor handed a state of its own for."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import connect, make_config, running

CANNED = str(Path(__file__).parents[3] / "support" / "servers" / "canned.py")
ASKED = {
    "a": {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "name?",
            "requestedSchema": {"type": "object", "properties": {}},
            "task": {"ttl": 1},
        },
    }
}
REST = f'"inputRequests":{json.dumps(ASKED)},"requestState":"s1","content":[]'
RESULTS = {
    "plain": '{"resultType":"input_required",' + REST + ',"resultType":"complete"}',
    # The first written with an escape: the same key to every reader.
    "escaped": '{"result\\u0054ype":"input_required",' + REST + ',"resultType":"complete"}',
}
CAPS = {"elicitation": {"form": {}}}


def first_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object as a reader that keeps a key's first value reads it, each key given
    twice noted."""
    read: dict[str, Any] = {}
    for key, value in pairs:
        if key in read:
            read.setdefault("given twice", []).append(key)
        else:
            read[key] = value
    return read


@pytest.mark.parametrize("tool", sorted(RESULTS))
async def test_a_result_giving_its_kind_twice_reaches_the_agent_as_mcpd_read_it(
    tmp_path: Path, tool: str
) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"tools": RESULTS}))
    server = {"command": sys.executable, "args": [CANNED, str(answers)]}
    with trio.fail_after(30):
        async with (
            running(make_config(tmp_path, {"s": server})) as daemon,
            connect(daemon.socket_path) as agent,
        ):
            meta = {"io.modelcontextprotocol/clientCapabilities": CAPS}
            line = await agent.rpc_text("tools/call", {"name": f"mcp__s__{tool}", "_meta": meta})
    result = json.loads(line, object_pairs_hook=first_keys)["result"]
    assert "given twice" not in result, result
    assert result["resultType"] == "complete", result
