"""Who may decide a call only the operator may decide, against agents that reach mcpd
through a relay of their host's, close what mcpd could read them by, or leave a child
behind: a running daemon refuses each one's shell tool, and a person's terminal decides
(``cli.on_socket.mcpd``, run apart)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from tests.support.cli.on_socket import mcpd
from tests.support.clients import self_approval
from tests.support.clients.hosted import scene
from tests.support.daemons.policy import LIMIT, Setup, policy_daemon

OPERATOR_ONLY: list[dict[str, Any]] = [
    {"tools": ["gh/create_issue"], "action": "ask", "decider": "operator"},
]
TOOL = "mcp__gh__create_issue"
ENDPOINT = {"http_listen": "127.0.0.1:0"}


async def refused_then_denied(setup: Setup, agent: self_approval.Agent, says: str) -> None:
    """The one call waiting is refused to ``agent``'s shell tool, saying ``says``; a
    person's terminal denies it."""
    [waiting] = await setup.pending()
    code, said = await agent.runs("approvals", "approve", waiting.id)
    assert code != 0 and says in said, said
    assert [p.id for p in setup.daemon.approvals.list()] == [waiting.id]
    await mcpd(Path(setup.daemon.socket_path), "approvals", "deny", waiting.id)
    await setup.none_pending()
    assert setup.reached("create_issue") == []


HOST = "the host that started the agent that made this call (pid"


async def test_a_hosts_shell_tool_cannot_decide_what_it_asked_through_a_plain_relay(
    tmp_path: Path,
) -> None:
    """A relay of lines (as socat is) is the agent mcpd sees; the host that started it
    asked, and its shell tool, out of the session, descends from the host."""
    with trio.fail_after(LIMIT):
        async with (
            policy_daemon(tmp_path, OPERATOR_ONLY) as setup,
            scene("relayed", setup.daemon.socket_path, TOOL) as host,
        ):
            await refused_then_denied(setup, host, HOST)


async def test_a_hosts_shell_tool_cannot_decide_through_a_bridge_a_launcher_set_apart(
    tmp_path: Path,
) -> None:
    """``setsid sh -c 'mcpd bridge ...; true'``: the bridge's session is the launcher's,
    and the host is above it, outside."""
    with trio.fail_after(LIMIT):
        async with (
            policy_daemon(tmp_path, OPERATOR_ONLY) as setup,
            scene("launched", setup.daemon.socket_path, TOOL) as host,
        ):
            await refused_then_denied(setup, host, HOST)


async def test_a_hosts_shell_tool_cannot_decide_what_it_asked_through_a_relay_to_the_endpoint(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, OPERATOR_ONLY, daemon_keys=ENDPOINT) as setup:
            daemon = setup.daemon
            assert daemon.agent_server.endpoint is not None
            port, token = str(daemon.agent_server.endpoint.port), daemon.http_token()
            async with scene("http-relayed", port, token, daemon.socket_path, TOOL) as host:
                await refused_then_denied(setup, host, HOST)


async def test_an_endpoint_agent_that_closed_its_connection_cannot_decide_another_s_call(
    tmp_path: Path,
) -> None:
    """An agent on the endpoint lists the tools and closes its connection, so that no
    process holds it any more; it is still the agent it was."""
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, OPERATOR_ONLY, daemon_keys=ENDPOINT) as setup:
            daemon = setup.daemon
            sock = daemon.socket_path
            assert daemon.agent_server.endpoint is not None
            port, token = str(daemon.agent_server.endpoint.port), daemon.http_token()
            async with (
                scene("closed", port, token, sock) as closed,
                self_approval.agent("asking", sock, TOOL, apart=True),
            ):
                await refused_then_denied(
                    setup, closed, "is an agent that had connected to mcpd (pid"
                )


async def test_a_child_a_gone_agent_left_in_its_session_cannot_decide_another_s_call(
    tmp_path: Path,
) -> None:
    """The agent connects and exits; nothing that started it runs any more (it was
    started apart), but its child does, in its session, and is refused."""
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, OPERATOR_ONLY) as setup:
            sock = setup.daemon.socket_path
            async with scene("left", sock, apart=True) as child:
                await child.reaped()
                async with self_approval.agent("asking", sock, TOOL, apart=True):
                    gone = "is in the session of an agent that had connected to mcpd"
                    await refused_then_denied(setup, child, gone)
