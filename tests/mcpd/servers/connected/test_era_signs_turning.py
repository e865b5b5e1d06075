"""A 2026-07-28 server that turns legacy while mcpd is connected to it (an older build
deployed again at its URL) is greeted again and served in the era it now speaks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import connect, make_config, running
from tests.support.daemons.supervision import wait_state
from tests.support.http_servers.era_turning import EraTurningServer
from tests.support.http_servers.serving import serve_http

TOOL = "mcp__turned__era"


def text_of(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def test_a_server_that_wants_legacy_sessions_now_is_greeted_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = EraTurningServer("sessions")
    async with serve_http(server) as http:
        cfg = make_config(tmp_path, {"turned": {"url": http.url()}}, health_interval=0)
        with trio.fail_after(30):
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                assert text_of(await agent.call(TOOL)) == "modern"
                server.turn()
                # The call that finds it out is refused by the server, as it was sent.
                refused = await agent.rpc("tools/call", {"name": TOOL, "arguments": {}})
                assert "No valid session ID" in refused["error"]["message"]
                await server.greeted.wait()
                row = await wait_state(agent, "turned", "ready")
                assert text_of(await agent.call(TOOL)) == "legacy"
    assert (row["era"], row["restarts"]) == ("legacy", 1)
    # Why the session ended is said, in the journal and (until it is back) in status.
    said = 'server/discover was refused with HTTP 400 ("Bad Request: No valid session ID'
    assert said in caplog.text and "as a server of the legacy era answers" in caplog.text


async def test_a_server_that_no_longer_knows_discover_is_greeted_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Its calls still work; its liveness probe shows what it has become.
    server = EraTurningServer("stateless")
    async with serve_http(server) as http:
        cfg = make_config(tmp_path, {"turned": {"url": http.url()}}, health_interval=0.2)
        with trio.fail_after(30):
            async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
                assert text_of(await agent.call(TOOL)) == "modern"
                server.turn()
                await server.greeted.wait()
                row = await wait_state(agent, "turned", "ready")
                assert text_of(await agent.call(TOOL)) == "legacy"
    assert (row["era"], row["restarts"]) == ("legacy", 1)
    assert "server/discover is unknown to it" in caplog.text
    assert server.discovers_refused <= 2  # greeted once more, not again and again
