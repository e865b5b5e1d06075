"""A hostile OAuth-protected server next to a well-behaved one, through a real daemon:
what its authorization server answers must not cost the other server anything, nor
break what mcpd shows of every server."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.daemon import Daemon
from tests.support.agent import Agent, connect, make_config, running
from tests.support.oauth_mcp import ProtectedMcp, login, serve_protected

LIMIT = 20


@contextlib.asynccontextmanager
async def two_servers(
    tmp: Path,
) -> AsyncIterator[tuple[ProtectedMcp, ProtectedMcp, Daemon, Agent]]:
    """``good`` and ``evil``, each a protected server with its own authorization server."""
    async with serve_protected() as good, serve_protected() as evil:
        config = make_config(
            tmp,
            {"good": {"url": good.mcp_url}, "evil": {"url": evil.mcp_url}},
            state_dir=str(tmp / "state"),
            startup_deadline=5.0,
        )
        async with running(config) as daemon, connect(daemon.socket_path) as agent:
            yield good, evil, daemon, agent


def rows(status: dict[str, Any], key: str = "server") -> dict[str, dict[str, Any]]:
    return {row[key]: row for row in status["servers"]}


@pytest.mark.parametrize("expires_in", [10**12, 1e300, float("inf")])
async def test_an_expiry_beyond_any_date_does_not_break_the_status(
    tmp_path: Path, expires_in: float
) -> None:
    with trio.fail_after(LIMIT):
        async with two_servers(tmp_path) as (good, evil, _daemon, agent):
            assert (await login(agent, good, "good"))["state"] == "ready"
            evil.expires_in = expires_in  # type: ignore[assignment]
            assert (await login(agent, evil, "evil"))["state"] == "ready"
            servers = rows(await agent.result("mcpd/status"), "alias")
            logins = rows(await agent.result("mcpd/auth/status"))
    assert servers["good"]["state"] == servers["evil"]["state"] == "ready"
    assert logins["good"]["logged_in"] and logins["good"]["expires_at"] is not None
    # An expiry no calendar holds is no known expiry: used until the server refuses it.
    assert logins["evil"]["logged_in"] and logins["evil"]["expires_at"] is None
