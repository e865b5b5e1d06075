"""Who may decide a call only the operator may decide, where a look at processes stops
short: a shell tool below more shells than mcpd reads, and a client its host started
below more launchers than mcpd reads. A running daemon, real processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from tests.support.cli.on_socket import mcpd
from tests.support.clients import self_approval
from tests.support.daemons.policy import LIMIT, policy_daemon

OPERATOR_ONLY: list[dict[str, Any]] = [
    {"tools": ["gh/create_issue"], "action": "ask", "decider": "operator"},
]
TOOL = "mcp__gh__create_issue"


async def test_a_hosts_shell_tool_below_more_shells_than_are_read_cannot_decide(
    tmp_path: Path,
) -> None:
    """The host's shell tool leaves its session and runs ``mcpd approvals approve``
    below enough shells that the host is not among the ancestors read."""
    with trio.fail_after(LIMIT):
        async with (
            policy_daemon(tmp_path, OPERATOR_ONLY) as setup,
            self_approval.agent("bridge", setup.daemon.socket_path, TOOL) as host,
        ):
            [waiting] = await setup.pending()
            code, said = await host.runs("nested", "70", "approvals", "approve", waiting.id)
            assert code != 0 and "descends from more processes than mcpd reads" in said, said
            assert [p.id for p in setup.daemon.approvals.list()] == [waiting.id]
            await mcpd(Path(setup.daemon.socket_path), "approvals", "deny", waiting.id)
            await setup.none_pending()
            assert setup.reached("create_issue") == []


async def test_a_client_started_below_more_launchers_than_are_read_is_not_its_hosts_to_decide(
    tmp_path: Path,
) -> None:
    """The host starts a client of its own under ``setsid`` and a stack of shells, more
    than mcpd reads above an agent: nothing then tells the host's shell tool from a
    person's terminal of the same user, and the call is refused to it, saying why."""
    with trio.fail_after(LIMIT):
        async with (
            policy_daemon(tmp_path, OPERATOR_ONLY) as setup,
            self_approval.agent("unconnected", setup.daemon.socket_path) as host,
        ):
            assert await host.runs("client", TOOL, "20") == (0, "")
            [waiting] = await setup.pending()
            code, said = await host.runs("approvals", "approve", waiting.id)
            assert code != 0 and "could not read all that started the agent" in said, said
            assert [p.id for p in setup.daemon.approvals.list()] == [waiting.id]
            assert setup.reached("create_issue") == []
