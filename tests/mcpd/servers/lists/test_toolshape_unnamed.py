"""A tool or a prompt whose name is empty is called by nothing MCP allows: through a
running daemon, under the default template and under ``{tool}``, it is left out of
what agents are listed, the journal says so naming its server, and neither the empty
name nor the template's name of it reaches the server."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.pins import Changing

OBJ = {"type": "object"}


@pytest.mark.parametrize("profile", ["default", "bare"])
async def test_a_tool_or_prompt_without_a_name_is_left_out(
    tmp_path: Path, profile: str, caplog: pytest.LogCaptureFixture
) -> None:
    ev = Changing(tmp_path)
    ev.write(
        {
            "tools": [
                {"name": "", "description": "nameless", "inputSchema": OBJ},
                {"name": "ok", "description": "named", "inputSchema": OBJ},
            ],
            "prompts": [{"name": "", "description": "nameless"}, {"name": "daily"}],
        }
    )
    cfg = make_config(
        tmp_path,
        {"ev": ev.config()},
        profiles={"bare": {"template": "{tool}"}},
        state_dir=str(tmp_path / "state"),
    )
    with trio.fail_after(60), caplog.at_level(logging.WARNING, "mcpd"):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            await agent.use_profile(profile)
            tools = await agent.tools()
            originals = {t["_meta"]["mcpd/originalName"] for t in tools}
            assert originals == {"ok", "relist"}, tools
            prompts: list[dict[str, Any]] = (await agent.result("prompts/list"))["prompts"]
            assert [p["_meta"]["mcpd/originalName"] for p in prompts] == ["daily"], prompts
            for name in ("", "mcp__ev__"):
                reply = await agent.rpc("tools/call", {"name": name, "arguments": {}})
                assert "error" in reply or reply["result"].get("isError") is True, reply
    assert not any(line.startswith("tools/call") for line in ev.reached()), ev.reached()
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("ev: tools/list: (unnamed): its name is empty") for m in said), said
    assert any(m.startswith("ev: prompts/list: (unnamed): its name is empty") for m in said), said
