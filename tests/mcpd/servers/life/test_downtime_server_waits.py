"""A tools/call the server answers with 429 or 503 and a Retry-After: the server is not
called again before then (nor later than a day from now), and the call, the next ones,
``mcpd status`` and the tool list say when mcpd tries it again. A Retry-After that is
no wait (garbage, negative, a time past) leaves the server to its breaker, and the
failed call says the state ``mcpd status`` shows. ``mcpd reset`` ends the wait sooner,
for the daemon's user and root only."""

from __future__ import annotations

import email.utils
import json
import logging
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.conftest import ROOT
from tests.support.clients.agent import connect, make_config, running
from tests.support.clients.daemon_http import MCP, auth, header_dict, http, modern, modern_headers
from tests.support.daemons.supervision import closed_port, text, wait_state
from tests.support.http_servers.serving import LegacySession, Responder, SeenRequest, serve_http

TOOLS = [{"name": "echo", "inputSchema": {"type": "object"}}]


def busy_server(retry_after: str, status: int = 429) -> LegacySession:
    """A legacy server that lists its tool and answers every call ``status`` with
    ``retry_after``."""

    async def handler(req: SeenRequest, respond: Responder) -> None:
        if req.method != "POST":
            await respond.reply(405)
        elif req.rpc_method == "tools/call":
            await respond.reply(status, "slow down", {"Retry-After": retry_after})
        else:
            await respond.json({"jsonrpc": "2.0", "id": req.rpc_id, "result": {}})

    return LegacySession(handler, tools=TOOLS)


def calls_seen(requests: list[SeenRequest]) -> int:
    return sum(1 for r in requests if r.method == "POST" and r.rpc_method == "tools/call")


def config(tmp_path: Path, url: str, **daemon: Any) -> Any:
    return make_config(
        tmp_path,
        {"busy": {"url": url, "era": "legacy"}},
        failure_threshold=5,
        cooldown_base=3.0,
        health_interval=0,
        **daemon,
    )


@pytest.mark.parametrize(
    ("retry_after", "status", "wait"),
    [("120", 429, r"\(in 1[12]\d s\)"), ("99999999", 503, r"\(in 86400 s\)")],
)
async def test_a_call_told_to_come_back_later_keeps_the_server_uncalled_until_then(
    tmp_path: Path, retry_after: str, status: int, wait: str
) -> None:
    with trio.fail_after(60):
        async with serve_http(busy_server(retry_after, status)) as srv:
            cfg = config(tmp_path, srv.url())
            async with running(cfg), connect(cfg.daemon.socket) as agent:
                await wait_state(agent, "busy", "ready")
                first = await agent.call("mcp__busy__echo")
                outage = first["_meta"]["mcpd/outage"]
                assert first["isError"] is True and outage["state"] == "open", first
                assert outage["retry_at"] is not None
                assert re.search(r"mcpd will retry at .+ " + wait, text(first)), text(first)
                # Not asked again before then: the next call is refused by mcpd.
                second = await agent.call("mcp__busy__echo")
                assert second["_meta"]["mcpd/outage"]["state"] == "open"
                assert re.search(wait, text(second)), text(second)
                assert calls_seen(srv.requests) == 1
                row = await wait_state(agent, "busy", "open")
                assert row["retry_at"] == outage["retry_at"]
                marked = (await agent.tools())[0]["description"]
                assert marked.startswith("[unavailable: busy is failing (circuit open)")
                if retry_after == "99999999":
                    # A day away: the times shown say which day.
                    day = f"{datetime.now() + timedelta(days=1):%Y-%m-%d}"
                    assert f"mcpd will retry at {day} " in text(first)
                    assert f"retrying at {day} " in marked


@pytest.mark.parametrize(
    "retry_after",
    ["abc", "-5", email.utils.formatdate(time.time() - 3600, usegmt=True)],
)
async def test_a_retry_after_that_is_no_wait_is_ignored_and_the_call_says_the_servers_state(
    tmp_path: Path, retry_after: str
) -> None:
    with trio.fail_after(60):
        async with serve_http(busy_server(retry_after)) as srv:
            cfg = config(tmp_path, srv.url())
            async with running(cfg), connect(cfg.daemon.socket) as agent:
                await wait_state(agent, "busy", "ready")
                first = await agent.call("mcp__busy__echo")
                outage = first["_meta"]["mcpd/outage"]
                assert (outage["state"], outage["retry_at"]) == ("degraded", None), first
                assert "HTTP 429" in text(first) and "retry" not in text(first)
                row = await wait_state(agent, "busy", "degraded", "ready", "open")
                assert row["state"] == "degraded"
                # The breaker alone decides: the next call reaches the server.
                second = await agent.call("mcp__busy__echo")
                assert second["_meta"]["mcpd/outage"]["state"] == "degraded"
                assert calls_seen(srv.requests) == 2


async def reset(socket: str, server: str) -> tuple[int, str]:
    """``mcpd reset SERVER``, run as a person runs it, with this checkout's code."""
    proc = await trio.run_process(
        [sys.executable, "-m", "mcpd", "reset", server, "--socket", socket],
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=ROOT,
    )
    return proc.returncode, (proc.stdout + proc.stderr).decode()


async def test_a_day_long_wait_is_ended_by_mcpd_reset_and_the_next_call_decides(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "mcpd")
    with trio.fail_after(60):
        async with serve_http(busy_server("99999999")) as srv:
            cfg = config(tmp_path, srv.url(), http_listen="127.0.0.1:0")
            async with running(cfg) as daemon, connect(cfg.daemon.socket) as agent:
                await wait_state(agent, "busy", "ready")
                first = await agent.call("mcp__busy__echo")
                assert re.search(r"\(in 86400 s\)", text(first)), text(first)
                # Not for a caller without a peer to check (the HTTP endpoint's token).
                endpoint = daemon.agent_server.endpoint
                assert endpoint is not None
                body = json.dumps(modern(1, "mcpd/reset", {"server": "busy"})).encode()
                named = {
                    **MCP,
                    **auth(daemon.http_token()),
                    **header_dict(modern_headers("mcpd/reset")),
                }
                reply = await http(endpoint.port, "POST", "/mcp", named, body)
                assert reply.json()["error"]["message"] == (
                    "mcpd/reset is only for the daemon's user and root, on its Unix socket"
                )
                assert (await wait_state(agent, "busy", "open"))["state"] == "open"
                code, out = await reset(cfg.daemon.socket, "busy")
                assert (code, out) == (
                    0,
                    "busy: circuit closed on trial (was open); its next call decides\n",
                )
                # The next call goes to the server, and decides: it fails, and the
                # server's new wait holds it again.
                second = await agent.call("mcp__busy__echo")
                assert calls_seen(srv.requests) == 2
                assert second["_meta"]["mcpd/outage"]["state"] == "open"
                code, out = await reset(cfg.daemon.socket, "nowhere")
                assert code == 1 and "no server named 'nowhere' is running" in out, out
    said = [r for r in caplog.records if getattr(r, "mcpd_event", None) == "reset"]
    assert len(said) == 1 and f"uid {os.getuid()}" in said[0].getMessage(), said


async def test_mcpd_reset_on_a_profile_s_socket_reaches_only_the_profile_s_servers(
    tmp_path: Path,
) -> None:
    """As ``mcpd status`` there shows only the profile's servers, a reset there finds
    only them: another server's circuit is left as it is, and the error names only
    the profile's servers."""
    sock = str(tmp_path / "p.sock")
    with trio.fail_after(60):
        async with serve_http(busy_server("99999999")) as srv:
            entry = {"url": srv.url(), "era": "legacy"}
            cfg = make_config(
                tmp_path,
                {"busy": entry, "other": entry},
                profiles={"p": {"servers": ["busy"], "socket": sock}},
                failure_threshold=5,
                health_interval=0,
            )
            async with running(cfg), connect(cfg.daemon.socket) as agent:
                for alias in ("busy", "other"):
                    await wait_state(agent, alias, "ready")
                    await agent.call(f"mcp__{alias}__echo")
                    await wait_state(agent, alias, "open")
                code, out = await reset(sock, "other")
                assert code == 1, out
                assert "no server named 'other' is running (servers: busy)" in out, out
                assert (await wait_state(agent, "other", "open"))["state"] == "open"
                code, out = await reset(sock, "busy")
                assert (code, out) == (
                    0,
                    "busy: circuit closed on trial (was open); its next call decides\n",
                )


async def test_mcpd_reset_of_a_server_told_to_wait_as_it_connected_says_whose_wait_it_is(
    tmp_path: Path,
) -> None:
    """Its connection is answered 503 with an hour's Retry-After: no circuit holds it
    but the restart's wait, which reset leaves as it is and says so, with how it ends."""

    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.reply(503, "busy", {"Retry-After": "3600"})

    with trio.fail_after(60):
        async with serve_http(handler) as srv:
            cfg = config(tmp_path, srv.url())
            async with running(cfg), connect(cfg.daemon.socket) as agent:
                await wait_state(agent, "busy", "failed")
                code, out = await reset(cfg.daemon.socket, "busy")
    assert code == 0, out
    assert out.startswith(
        "busy: its circuit is closed already; but the server is failed, not connected: "
        "calls are refused until it is started or connected again (next try at "
    ), out
    assert "That wait is the restart's, which reset does not end" in out, out
    assert "nothing to reset" not in out and "next call decides" not in out, out


async def test_mcpd_reset_of_a_server_gone_says_its_calls_wait_for_it_to_be_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its circuit opened, then it went away: reset closes the circuit, and says its
    calls are refused until it is connected again, not that the next one decides."""
    caplog.set_level(logging.INFO, "mcpd")
    port = closed_port()
    with trio.fail_after(120):
        entry = {"url": f"http://127.0.0.1:{port}/mcp", "era": "legacy"}
        cfg = make_config(
            tmp_path,
            {"busy": entry},
            failure_threshold=1,
            cooldown_base=1.0,
            health_interval=0,
            backoff_base=0.5,
            backoff_cap=16.0,
        )
        async with running(cfg) as daemon, connect(cfg.daemon.socket) as agent:
            async with serve_http(busy_server("abc", 500), port=port):
                await wait_state(agent, "busy", "ready")
                assert "HTTP 500" in text(await agent.call("mcp__busy__echo"))
                await wait_state(agent, "busy", "open")
            await wait_state(agent, "busy", "unreachable")
            # Asked while it waits to try again, with time to spare for the command to
            # start: a reset that lands during a try meets a server coming up instead.
            server = daemon.supervisor.servers["busy"]
            while not (
                server.phase == "waiting" and server.outage().retry_at - trio.current_time() > 5.0
            ):
                await server.phase_changed()
            code, out = await reset(cfg.daemon.socket, "busy")
    assert code == 0, out
    assert re.match(
        r"busy: circuit closed on trial \(was (open|half_open)\); but the server is "
        r"unreachable, not connected: calls are refused until",
        out,
    ), out
    said = [r.getMessage() for r in caplog.records if r.name == "mcpd.server"]
    assert any("unreachable, not connected" in line for line in said), said
    assert "circuit closed on trial as asked: its next call decides" in said, said
