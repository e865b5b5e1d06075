"""A hostile agent against the ``[[policy]]`` rules of a running daemon: a requestState of
mcpd's (made up, or taken from another call) never carries a call past its rules, and
arguments that give a key twice, or that mcpd cannot show as the server reads them
(``9007199254740993``), never get a person's approval for what they do not show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from tests.support.cli.on_socket import mcpd
from tests.support.clients import self_approval
from tests.support.clients.agent import META, connect
from tests.support.clients.daemon_http import MCP, auth, header_dict, http, modern, modern_headers
from tests.support.daemons.policy import LIMIT, policy_daemon, text

ASKS = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
APPROVE = {"action": "accept", "content": {"decision": "approve"}}


async def test_a_made_up_request_state_of_mcpd_s_carries_no_call_past_a_deny(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup, connect(setup.daemon.socket_path) as agent:
            for state in ("mcpd-ask:guess", "mcpd-ask:"):
                params = {
                    "name": "mcp__gh__delete_repo",
                    "arguments": {"text": "x"},
                    "requestState": state,
                    "inputResponses": {"mcpd_1": APPROVE},
                }
                reply = await agent.rpc("tools/call", params)
                assert "requestState is mcpd's and has expired" in reply["error"]["message"]
            assert setup.reached("delete_repo") == []
            records = await setup.records()
            assert [(r.name, r.outcome) for r in records] == [("mcp__gh__delete_repo", "error")] * 2


async def asked(agent: Any, name: str) -> tuple[str, str]:
    """A call to the ``ask`` tool ``name`` that declares elicitation: mcpd's input_required,
    as (its key, its requestState)."""
    params = {"name": name, "arguments": {"text": "a"}, "_meta": ASKS}
    first = (await agent.rpc("tools/call", params))["result"]
    assert first["resultType"] == "input_required"
    [key] = first["inputRequests"]
    return key, first["requestState"]


async def test_mcpd_s_request_state_answers_only_its_own_call(tmp_path: Path) -> None:
    """A token mcpd gave for one waiting call, sent with the same tool's call with other
    arguments, another tool's call, or by another agent (declaring elicitation or not),
    approves nothing: those calls are refused and recorded, and the waiting call still
    waits."""
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup:
            sock = setup.daemon.socket_path
            async with connect(sock) as owner, connect(sock) as thief:
                key, state = await asked(owner, "mcp__gh__create_issue")
                [waiting] = await setup.pending()
                answer = {key: APPROVE}
                tries = [
                    (owner, "mcp__gh__create_issue", ASKS),  # other arguments
                    (owner, "mcp__gh__delete_repo", META),
                    (owner, "mcp__gh__delete_repo", ASKS),
                    (thief, "mcp__gh__create_issue", META),
                    (thief, "mcp__gh__create_issue", ASKS),
                    (thief, "mcp__gh__delete_repo", META),
                ]
                for who, name, meta in tries:
                    params = {
                        "name": name,
                        "arguments": {"text": "stolen"},
                        "_meta": meta,
                        "requestState": state,
                        "inputResponses": answer,
                    }
                    reply = await who.rpc("tools/call", params)
                    said = reply["error"]["message"]
                    assert said.startswith("this requestState is mcpd's and continues "), reply
                assert [p.id for p in setup.daemon.approvals.list()] == [waiting.id]
                assert setup.reached("delete_repo") == setup.reached("create_issue") == []
                records = await setup.records()
                assert [(r.name, r.outcome) for r in records] == [
                    (name, "error") for _, name, _ in tries
                ]
                # Its own agent's answer still decides it.
                params = {
                    "name": "mcp__gh__create_issue",
                    "arguments": {"text": "a"},
                    "_meta": ASKS,
                    "requestState": state,
                    "inputResponses": answer,
                }
                done = (await owner.rpc("tools/call", params))["result"]
                assert text(done) == "create_issue:a"
            assert [m["params"]["arguments"] for m in setup.reached("create_issue")] == [
                {"text": "a"}
            ]


async def test_a_new_tcp_connection_is_no_new_allowance(tmp_path: Path) -> None:
    """Over the TCP endpoint the kernel names no process: an agent connecting afresh for
    each call is held to its rule's rate."""
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, daemon_keys={"http_listen": "127.0.0.1:0"}) as setup:
            daemon = setup.daemon
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            wanted = header_dict(modern_headers("tools/call", "mcp__gh__read_repo"))
            headers = {**MCP, **auth(token), **wanted}
            said = []
            for i in range(4):
                params = {"name": "mcp__gh__read_repo", "arguments": {"text": "r"}}
                body = json.dumps(modern(i, "tools/call", params)).encode()
                reply = await http(port, "POST", "/mcp", headers, body)  # a connection each
                said.append(text(reply.json()["result"]))
            assert said[:2] == ["read_repo:r"] * 2
            assert all("mcp__gh__read_repo" in t and "again" in t for t in said[2:]), said
            assert len(setup.reached("read_repo")) == 2
            records = await setup.records()
            assert [r.decision for r in records] == ["allow", "allow", "limited", "limited"]


def call_with(rid: int, name: str, arguments: bytes) -> bytes:
    """A tools/call line whose arguments are ``arguments``, byte for byte."""
    params = {"name": name, "arguments": "ARGUMENTS", "_meta": ASKS}
    line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
    return line.replace('"ARGUMENTS"', arguments.decode()).encode() + b"\n"


async def test_arguments_giving_a_key_twice_are_refused_where_a_person_would_be_asked(
    tmp_path: Path,
) -> None:
    twice = b'{"text":"delete","text":"read"}'
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup, connect(setup.daemon.socket_path) as agent:
            await agent.send_raw(call_with(1, "mcp__gh__create_issue", twice))
            [refused] = await agent.wait_unmatched(1)
            said = text(refused["result"])
            assert refused["result"]["isError"] is True
            assert "give the key 'text' more than once" in said and "nor ask anyone" in said
            assert setup.daemon.approvals.version == 0
            # A call no person approves goes as it came: the server reads it as it will.
            await agent.send_raw(call_with(2, "mcp__gh__read_repo", twice))
            [_, allowed] = await agent.wait_unmatched(2)
            assert text(allowed["result"]) == "read_repo:read"
            assert setup.reached("create_issue") == []
            asked, read = await setup.records()
            assert (asked.decision, asked.decided_by, asked.outcome) == (
                "denied",
                "mcpd",
                "refused",
            )
            assert (
                asked.reason == "denied by mcpd: the arguments give the key 'text' more than once"
            )
            assert (read.decision, read.outcome) == ("allow", "ok")


async def test_arguments_mcpd_cannot_show_are_refused_where_a_person_would_be_asked(
    tmp_path: Path,
) -> None:
    """A person shown ``(not valid JSON)`` for a call the server runs as ``action:
    delete``: the call is refused before anyone is asked, and its record keeps the
    arguments as sent."""
    # A number a reader of doubles reads as another: mcpd reads it, and cannot show it
    # as the server will read it.
    unshowable = b'{"repo":"acme/prod","text":"delete","pad":9007199254740993}'
    keys = {"audit_arguments": True}
    with trio.fail_after(LIMIT):
        async with (
            policy_daemon(tmp_path, daemon_keys=keys) as setup,
            connect(setup.daemon.socket_path) as agent,
        ):
            await agent.send_raw(call_with(1, "mcp__gh__create_issue", unshowable))
            [refused] = await agent.wait_unmatched(1)
            said = text(refused["result"])
            assert refused["result"]["isError"] is True
            assert "cannot be shown as the server will read them" in said
            assert "9007199254740993" in said and "nor ask anyone" in said
            assert setup.daemon.approvals.version == 0
            # A call no person approves goes as it came.
            await agent.send_raw(call_with(2, "mcp__gh__read_repo", unshowable))
            [_, allowed] = await agent.wait_unmatched(2)
            assert text(allowed["result"]) == "read_repo:delete"
            assert setup.reached("create_issue") == []
            asked, read = await setup.records()
            assert (asked.decision, asked.decided_by, asked.outcome) == (
                "denied",
                "mcpd",
                "refused",
            )
            assert asked.reason is not None and "9007199254740993" in asked.reason
            assert asked.arguments == read.arguments == json.loads(unshowable)


async def test_a_child_left_by_an_agent_that_exited_cannot_decide_its_call(tmp_path: Path) -> None:
    """The process that connected and made the call exits; its child keeps the connection,
    in the same session, and runs ``mcpd approvals approve``: still the agent's session
    (read when it connected), so refused; a person's own terminal decides it."""
    with trio.fail_after(LIMIT):
        async with (
            policy_daemon(tmp_path) as setup,
            self_approval.agent("call", setup.daemon.socket_path, "mcp__gh__create_issue") as agent,
        ):
            [waiting] = await setup.pending()
            await agent.reaped()
            code, said = await agent.runs("approvals", "approve", waiting.id)
            assert code != 0 and "same session as the agent" in said, said
            assert [p.id for p in setup.daemon.approvals.list()] == [waiting.id]
            await mcpd(Path(setup.daemon.socket_path), "approvals", "deny", waiting.id)
            await setup.none_pending()
            assert setup.reached("create_issue") == []


async def test_a_hosts_shell_tool_cannot_decide_what_the_host_asked_through_the_bridge(
    tmp_path: Path,
) -> None:
    """The agent mcpd sees is ``mcpd bridge``; the host that started it is the real
    agent, and its shell tool the bridge's sibling. Out of the session (``setsid``), the
    tool still descends from the host, and is refused."""
    with trio.fail_after(LIMIT):
        async with (
            policy_daemon(tmp_path) as setup,
            self_approval.agent(
                "bridge", setup.daemon.socket_path, "mcp__gh__create_issue"
            ) as host,
        ):
            [waiting] = await setup.pending()
            code, said = await host.runs("approvals", "approve", waiting.id)
            assert code != 0 and "the host that started the agent that made this call" in said, said
            assert "(such as its shell tool), cannot decide it" in said
            assert [p.id for p in setup.daemon.approvals.list()] == [waiting.id]
            await mcpd(Path(setup.daemon.socket_path), "approvals", "deny", waiting.id)
            await setup.none_pending()
            assert setup.reached("create_issue") == []


async def test_an_agent_on_the_tcp_endpoint_cannot_decide_its_own_call(tmp_path: Path) -> None:
    """The kernel names no process of a TCP peer; mcpd finds the one that holds the
    connection when its call begins to wait, and refuses what it started."""
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, daemon_keys={"http_listen": "127.0.0.1:0"}) as setup:
            daemon = setup.daemon
            assert daemon.agent_server.endpoint is not None
            port, token, sock = (
                daemon.agent_server.endpoint.port,
                daemon.http_token(),
                daemon.socket_path,
            )
            tool = "mcp__gh__create_issue"
            async with self_approval.agent("endpoint", str(port), token, tool, sock) as agent:
                [waiting] = await setup.pending()
                code, said = await agent.runs("approvals", "approve", waiting.id)
                assert code != 0 and "the agent that made this call (pid" in said, said
                assert [p.id for p in daemon.approvals.list()] == [waiting.id]
                await mcpd(Path(sock), "approvals", "deny", waiting.id)
                await setup.none_pending()
            assert setup.reached("create_issue") == []


OPERATOR_ONLY: list[dict[str, Any]] = [
    {"tools": ["gh/create_issue"], "action": "ask", "decider": "operator"},
]


async def test_another_connected_agents_shell_tool_cannot_decide_a_call(tmp_path: Path) -> None:
    """A call only the operator may decide, decided by a process another agent connected
    to mcpd started: refused as that agent's, whoever's call it is; a terminal of the
    person's own decides it."""
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, OPERATOR_ONLY) as setup:
            sock = setup.daemon.socket_path
            async with (
                self_approval.agent("asking", sock, "mcp__gh__create_issue", apart=True),
                self_approval.agent("socket", sock) as other,
            ):
                [waiting] = await setup.pending()
                code, said = await other.runs("approvals", "approve", waiting.id)
                assert code != 0 and "is an agent connected to mcpd (pid" in said, said
                assert "an agent must not decide calls that wait for a person" in said
                assert [p.id for p in setup.daemon.approvals.list()] == [waiting.id]
                said = await mcpd(Path(sock), "approvals", "approve", waiting.id)
                assert said.startswith(f"approved {waiting.id}"), said
                await setup.none_pending()
            assert [m["params"]["arguments"] for m in setup.reached("create_issue")] == [
                {"text": "mine"}
            ]


async def test_a_bridges_host_cannot_decide_a_call_of_a_client_it_started_apart(
    tmp_path: Path,
) -> None:
    """A host connected through ``mcpd bridge`` starts a plain client of the socket under
    ``setsid`` (its child still): that client's call is refused to the host's shell tool,
    as the host's own calls are."""
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, OPERATOR_ONLY) as setup:
            sock = setup.daemon.socket_path
            async with self_approval.agent("bridge", sock, "mcp__gh__read_repo") as host:
                code, said = await host.runs("client", "mcp__gh__create_issue")
                assert code == 0, said
                [waiting] = await setup.pending()
                code, said = await host.runs("approvals", "approve", waiting.id)
                assert code != 0, said
                assert "the host that started the agent that made this call (pid" in said, said
                assert [p.id for p in setup.daemon.approvals.list()] == [waiting.id]
                await mcpd(Path(sock), "approvals", "deny", waiting.id)
                await setup.none_pending()
            assert setup.reached("create_issue") == []
