"""Agents gone whose processes live on, as a running daemon keeps them: a host that
starts one bridge after another does not fill the list kept of them. Real processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.policy.deciders import departed
from tests.support.cli.on_socket import mcpd
from tests.support.clients import self_approval
from tests.support.clients.hosted import scene
from tests.support.daemons.policy import LIMIT, policy_daemon

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


async def test_agents_leave_without_a_look_at_the_machine_and_a_child_left_behind_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents connect and leave: a host's bridges, one after another, and an agent that
    exits leaving a child in its session. None of them leaving has mcpd read every
    process; once someone decides it does, and the child left behind is refused."""
    scans: list[None] = []
    read = departed.sessions_running

    def counted() -> set[int]:
        scans.append(None)
        return read()

    monkeypatch.setattr(departed, "sessions_running", counted)
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, OPERATOR_ONLY) as setup:
            sock = setup.daemon.socket_path
            async with (
                self_approval.agent("unconnected", sock) as host,
                scene("left", sock, apart=True) as child,
            ):
                assert await host.runs("bridges", "3") == (0, "")
                await child.reaped()
                async with self_approval.agent("asking", sock, TOOL, apart=True):
                    [waiting] = await setup.pending()
                    assert scans == []
                    code, said = await child.runs("approvals", "approve", waiting.id)
                    assert code != 0 and "is in the session of an agent that had" in said, said
                    assert scans
                    await mcpd(Path(sock), "approvals", "deny", waiting.id)
                    await setup.none_pending()
            assert setup.reached("create_issue") == []


async def test_what_a_child_left_in_a_session_its_agent_led_starts_apart_is_refused(
    tmp_path: Path,
) -> None:
    """An agent that leads its own session (``setsid AGENT``) connects and exits, leaving
    a child in that session; a command the child runs in a session of its own
    (``setsid``) descends from it and is refused, saying so. A person's terminal, apart
    from it, still decides."""
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, OPERATOR_ONLY) as setup:
            sock = setup.daemon.socket_path
            async with scene("left-leading", sock, apart=True) as child:
                await child.reaped()
                async with self_approval.agent("asking", sock, TOOL, apart=True):
                    [waiting] = await setup.pending()
                    code, said = await child.runs("approvals", "approve", waiting.id)
                    assert code != 0, said
                    assert "descends from a process in the session of an agent that had" in said
                    await mcpd(Path(sock), "approvals", "deny", waiting.id)
                    await setup.none_pending()
            assert setup.reached("create_issue") == []


async def test_a_shell_that_ran_mcpd_call_is_told_why_it_cannot_decide_and_where_to(
    tmp_path: Path,
) -> None:
    """A person's shell runs ``mcpd call``, then ``mcpd approvals approve`` of another
    agent's call: refused, naming that shell and the call it ran (mcpd's own, an agent
    all the same), and saying to decide from a new terminal."""
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, OPERATOR_ONLY) as setup:
            sock = setup.daemon.socket_path
            async with self_approval.agent("unconnected", sock, apart=True) as shell:
                await shell.runs("call", "mcp__gh__read_repo")
                async with self_approval.agent("asking", sock, TOOL, apart=True):
                    [waiting] = await setup.pending()
                    code, said = await shell.runs("approvals", "approve", waiting.id)
                    assert code != 0, said
                    assert "deciding a call (mcpd approvals) is refused: this process " in said
                    assert "whose command line read `mcpd call`, since ended" in said, said
                    assert "open a new terminal window" in said
                    await mcpd(Path(sock), "approvals", "deny", waiting.id)
                    await setup.none_pending()
            assert setup.reached("create_issue") == []


async def test_a_shell_that_listed_tools_for_a_program_is_told_that_flag_made_it_an_agent(
    tmp_path: Path,
) -> None:
    """``mcpd tools`` for a person is no agent; ``mcpd tools --json`` is: the refusal
    names the command with the flag that made it one, and says why that counts."""
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, OPERATOR_ONLY) as setup:
            sock = setup.daemon.socket_path
            async with self_approval.agent("unconnected", sock, apart=True) as shell:
                await shell.runs("tools", "--json")
                async with self_approval.agent("asking", sock, TOOL, apart=True):
                    [waiting] = await setup.pending()
                    code, said = await shell.runs("approvals", "approve", waiting.id)
                    assert code != 0, said
                    assert "whose command line read `mcpd tools --json`, since ended: a " in said
                    assert "listing for a program (`--json`, `--format`) is an agent of" in said
                    await mcpd(Path(sock), "approvals", "deny", waiting.id)
                    await setup.none_pending()
            assert setup.reached("create_issue") == []
