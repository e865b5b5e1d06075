"""A reload's breaker, restart and health keys are in force for the servers it keeps
running, as ``mcpd reload`` says: the failures already counted count toward the new
threshold, the next cooldown is the new one, and a new health interval starts its
checks without a restart."""

from __future__ import annotations

import re
from pathlib import Path

import trio

from mcpd.config.loading.load import load
from tests.support.clients.agent import connect, running
from tests.support.daemons.reloading import write_config
from tests.support.daemons.supervision import text, wait_state
from tests.support.http_servers.serving import LegacySession, Responder, SeenRequest, serve_http

TOOLS = [{"name": "echo", "inputSchema": {"type": "object"}}]


async def failing_calls(req: SeenRequest, respond: Responder) -> None:
    if req.method != "POST":
        await respond.reply(405)
    elif req.rpc_method == "tools/call":
        await respond.reply(500, "broken")
    else:
        await respond.json({"jsonrpc": "2.0", "id": req.rpc_id, "result": {}})


def probes(requests: list[SeenRequest]) -> int:
    """The health checks sent: a legacy server's is a ping."""
    return sum(1 for r in requests if r.method == "POST" and r.rpc_method == "ping")


async def test_a_reload_puts_breaker_restart_and_health_keys_in_force_for_a_running_server(
    tmp_path: Path,
) -> None:
    config_path, sock = tmp_path / "mcpd.toml", tmp_path / "mcpd.sock"
    with trio.fail_after(60):
        async with serve_http(LegacySession(failing_calls, tools=TOOLS)) as srv:
            server = {"flaky": f'url = "{srv.url()}"\nera = "legacy"\n'}
            before = "failure_threshold = 10\ncooldown_base = 3.0\nhealth_interval = 0\n"
            write_config(config_path, sock, server, before)
            async with (
                running(load(config_path), str(config_path)) as daemon,
                connect(str(sock)) as agent,
            ):
                await wait_state(agent, "flaky", "ready")
                for _ in range(2):
                    await agent.call("mcp__flaky__echo")
                after = (
                    "failure_threshold = 3\ncooldown_base = 30.0\ncooldown_cap = 60.0\n"
                    "health_interval = 0.3\nmax_restarts = 2\n"
                )
                write_config(config_path, sock, server, after)
                report = await agent.result("mcpd/reload")
                assert report["unchanged"] == ["flaky"]
                assert "daemon.failure_threshold" in report["settings"]
                # The server runs on, now checked every 0.3 s.
                listed = probes(srv.requests)
                with trio.move_on_after(10):
                    while probes(srv.requests) < listed + 3:
                        await trio.sleep(0.05)
                assert probes(srv.requests) >= listed + 3, "no health check after the reload"
                assert daemon.supervisor.servers["flaky"].policy.config.max_restarts == 2
                # Its two failures count toward the new threshold: the third opens the
                # circuit, for the new cooldown.
                await agent.call("mcp__flaky__echo")
                row = await wait_state(agent, "flaky", "open", "ready", "degraded")
                assert row["state"] == "open", row
                assert row["breaker"]["consecutive_failures"] == 3
                refused = await agent.call("mcp__flaky__echo")
                assert refused["_meta"]["mcpd/outage"]["state"] == "open"
                assert re.search(r"\(in (29|30) s\)", text(refused)), text(refused)
