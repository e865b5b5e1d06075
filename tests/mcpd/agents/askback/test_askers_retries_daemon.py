"""A 2026-07-28 agent answering what a legacy server asked through a ``requestState``
of mcpd's, through a running daemon: the retry continues the call only when it is that
call sent again; one with other arguments is refused, saying so, and the question waits
on for the retry that is."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import connect, make_config, running

LEAKY = str(Path(__file__).parents[3] / "support" / "hostile" / "leaky_server.py")
CAPS = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}


async def test_a_retry_with_other_arguments_continues_no_question_of_its_server(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"leaky": {"command": sys.executable, "args": [LEAKY]}})
    with trio.fail_after(30):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            params: dict[str, Any] = {"name": "mcp__leaky__ask", "_meta": CAPS}
            first = await agent.result("tools/call", {**params, "arguments": {"v": 1}})
            assert first["resultType"] == "input_required"
            [key] = first["inputRequests"]
            params["requestState"] = first["requestState"]
            params["inputResponses"] = {key: {"action": "accept", "content": {}}}
            other = await agent.rpc("tools/call", {**params, "arguments": {"v": 2}})
            assert other["error"]["message"] == (
                "this requestState is mcpd's and continues a call with other arguments"
            )
            done = await agent.result("tools/call", {**params, "arguments": {"v": 1}})
            assert done["content"] == [{"type": "text", "text": "answered"}]
