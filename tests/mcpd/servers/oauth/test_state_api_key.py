"""A server that wants an API key, not a login: it answers ``401`` with
``WWW-Authenticate: Bearer error="invalid_token"`` and serves no OAuth metadata at all.
Its outage says what happened and both ways forward, everywhere a person or a model
looks; ``mcpd auth login`` says plainly, before any browser, that it is no OAuth
server, instead of reporting a registration at an endpoint that was only guessed."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio

from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.http_servers.serving import HttpServer, Responder, SeenRequest, serve_http

LIMIT = 30
ROOT = Path(__file__).resolve().parents[4]
CHALLENGE = 'Bearer error="invalid_token", error_description="API key missing"'


async def wants_a_key(req: SeenRequest, respond: Responder) -> None:
    """401 on the endpoint, 404 on every metadata path, and (as some servers do with
    any POST they do not know) 202 on a POST elsewhere."""
    path = urlsplit(req.target).path
    if req.method == "POST" and path == "/mcp":
        await respond.json(
            {"error": "invalid_token"}, 401, headers=[("WWW-Authenticate", CHALLENGE)]
        )
    elif req.method == "POST":
        await respond.reply(202)
    else:
        await respond.reply(404, "not found")


@contextlib.asynccontextmanager
async def daemon_for_key_server(
    tmp: Path, era: str = "auto"
) -> AsyncIterator[tuple[HttpServer, str, Agent]]:
    async with serve_http(wants_a_key) as srv:
        server = {"url": srv.url("/mcp"), "era": era}
        config = make_config(tmp, {"keyed": server}, state_dir=str(tmp / "state"))
        async with running(config) as daemon, connect(daemon.socket_path) as agent:
            yield srv, daemon.socket_path, agent


async def mcpd(socket: str, *argv: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BROWSER", "DISPLAY")}
    proc = await trio.run_process(
        [sys.executable, "-m", "mcpd", *argv, "--socket", socket],
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=env,
        cwd=ROOT,
    )
    return proc.returncode, (proc.stdout + proc.stderr).decode()


def says_both_ways(text: str) -> bool:
    return (
        "HTTP 401" in text
        and "invalid_token" in text
        and "`headers`" in text
        and "`mcpd auth login keyed`" in text
    )


async def test_the_outage_says_what_happened_and_both_ways_forward(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with trio.fail_after(LIMIT):
        async with daemon_for_key_server(tmp_path) as (_srv, sock, agent):
            row: dict[str, Any] = (await agent.result("mcpd/status"))["servers"][0]
            (auth,) = (await agent.result("mcpd/auth/status"))["servers"]
            result = await agent.call("mcp__keyed__anything")
            code, shown = await mcpd(sock, "status")
    assert row["state"] == "needs_login"
    assert says_both_ways(row["last_error"]), row["last_error"]
    assert "API key missing" in row["last_error"]
    assert auth["state"] == "needs_login" and says_both_ways(auth["needs_login"])
    assert code == 0 and says_both_ways(shown), shown
    text = result["content"][0]["text"]
    assert result["isError"] is True and says_both_ways(text), text
    journal = [
        r.getMessage()
        for r in caplog.records
        if getattr(r, "mcpd_server", None) == "keyed"
        and getattr(r, "mcpd_event", None) == "needs_login"
    ]
    assert journal and all(says_both_ways(line) for line in journal), journal


async def test_a_login_says_early_that_the_server_is_no_oauth_server(tmp_path: Path) -> None:
    """Of unknown revision, the server may be a 2025-03-26 one, for which the default
    endpoints stand in when there is no metadata: what its guessed registration
    endpoint answers (a 202) shows it is no authorization server."""
    with trio.fail_after(LIMIT):
        async with daemon_for_key_server(tmp_path) as (srv, sock, _agent):
            code, said = await mcpd(sock, "auth", "login", "keyed", "--no-browser")
    assert code != 0
    assert "open this address" not in said  # no browser, no URL
    metadata = srv.url("/.well-known/oauth-protected-resource/mcp")
    assert f'keyed offers no OAuth authorization metadata at "{metadata}"' in said, said
    assert "it does not support OAuth login; give it a token in `headers`" in said
    assert f"{srv.url('/register')}, answered HTTP 202, which is no client registration" in said
    assert "register a client by hand" not in said


async def test_a_modern_server_without_metadata_gets_no_guessed_endpoints(tmp_path: Path) -> None:
    """A server configured as modern is of a revision that has no default endpoints:
    no resource metadata is the end of it, and nothing is sent to a guessed URL."""
    with trio.fail_after(LIMIT):
        async with daemon_for_key_server(tmp_path, era="modern") as (srv, sock, _agent):
            code, said = await mcpd(sock, "auth", "login", "keyed", "--no-browser")
    assert code != 0
    prm = srv.url("/.well-known/oauth-protected-resource")
    tried = f'"{prm}/mcp", "{prm}"'
    assert f"keyed offers no OAuth authorization metadata at {tried} (HTTP 404): " in said
    assert "it does not support OAuth login; give it a token in `headers`" in said
    asked = [(r.method, urlsplit(r.target).path) for r in srv.requests]
    assert [a for a in asked if a != ("POST", "/mcp")] == [
        ("GET", "/.well-known/oauth-protected-resource/mcp"),
        ("GET", "/.well-known/oauth-protected-resource"),
    ]
