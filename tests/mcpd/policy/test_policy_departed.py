"""Agents gone whose processes live on, as a running daemon keeps them: a host that
starts one bridge after another does not fill the list kept of them. Real processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.policy import departed
from tests.support import self_approval
from tests.support.policy_daemon import LIMIT, policy_daemon
from tests.support.socket_cli import mcpd

OPERATOR_ONLY: list[dict[str, Any]] = [
    {"tools": ["gh/create_issue"], "action": "ask", "decider": "operator"},
]
TOOL = "mcp__gh__create_issue"


async def test_the_bridges_a_host_starts_one_after_another_do_not_lock_a_person_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room for two agents gone, a host runs ``mcpd bridge`` three times over (each
    still running as it disconnects): they are one agent gone, and a person's terminal
    still decides another agent's call."""
    monkeypatch.setattr(departed, "_DEPARTED", 2)
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, OPERATOR_ONLY) as setup:
            sock = setup.daemon.socket_path
            async with self_approval.agent("unconnected", sock) as host:
                assert await host.runs("bridges", "3") == (0, "")
                async with self_approval.agent("asking", sock, TOOL, apart=True):
                    [waiting] = await setup.pending()
                    await mcpd(Path(sock), "approvals", "deny", waiting.id)
                    await setup.none_pending()
