"""mcpd's policy with the official SDK clients as agents, through `mcpd bridge`: the
Python SDK 2.x in each era (2026-07-28: mcpd's input_required; the handshake: an
elicitation request of mcpd's own), the Python SDK 1.x and the TypeScript SDK, each with
an elicitation handler. Its user is asked about an ``ask`` tool: approving sends the
call to the server once, denying never reaches it; a ``deny`` rule never reaches it
either. A client that declared no elicitation waits while the operator decides with
``mcpd approvals`` from another process. Every call is in the audit log with who
decided it. Long arguments show every key in the form: the user is shown what the
server would get after a long value.

A call that waited is looked at again once its wait is over: the server changing the
tool meanwhile (mcpd holds it) refuses it when the operator approves; a reload whose
rules deny it ends it at once, and ``mcpd approvals`` lists it no more; one whose rules
allow it sends it once when approved."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.audit.reader import AuditRecords
from mcpd.config.loading.load import parse_config
from mcpd.daemon import Daemon
from tests.support.cli.apart import APART
from tests.support.clients.agent import running
from tests.support.daemons.waiting import ASK, CREATE, SEARCH, waiting_daemon
from tests.support.hosts.peers import ROOT, console_script, node_env, v1_python
from tests.support.hosts.third_party import node
from tests.support.system.procs import scripted

HERE = Path(__file__).resolve().parent
PEERS = ROOT / "tests" / "peers"
LIMIT = 100
CLIENTS = ["python-2026", "python-handshake", "python-v1", "typescript"]
VERSIONS = {
    "python-2026": "2026-07-28",
    "python-handshake": "2025-11-25",
    "python-v1": "2025-11-25",
    "typescript": "2025-11-25",
}
RULES = [
    {"tools": ["*/delete_*"], "action": "deny", "reason": "deleting is done by people"},
    {"tools": ["gh/create_issue"], "action": "ask", "reason": "issues need a person"},
]


def config(tmp_path: Path) -> tuple[Any, Path]:
    log = tmp_path / "server.in"
    command, args = scripted("--names", "create_issue,delete_repo,read", "--log-file", str(log))
    parsed = parse_config(
        {
            "daemon": {
                "socket": str(tmp_path / "mcpd.sock"),
                "state_dir": str(tmp_path / "state"),
                "audit_journal": False,
            },
            "servers": {"gh": {"command": command, "args": list(args)}},
            "policy": RULES,
        }
    )
    return parsed, log


def reached(log: Path, tool: str) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return [m for m in lines if m.get("method") == "tools/call" and m["params"]["name"] == tool]


def client_command(client: str, asks: str, calls: list[Any], sock: str) -> tuple[list[str], Any]:
    bridge = [console_script("mcpd"), "bridge", "--socket", sock]
    encoded = json.dumps(calls)
    if client == "typescript":
        script = str(HERE / "ts_sdk_policy.mjs")
        return [node(), script, str(PEERS), asks, encoded, "--", *bridge], node_env()
    python = v1_python() if client == "python-v1" else sys.executable
    mode = "auto" if client == "python-2026" else "legacy"
    script = str(HERE / "sdk_client_policy.py")
    return [python, script, mode, asks, encoded, "--", *bridge], None


async def run_client(client: str, asks: str, calls: list[Any], sock: str) -> dict[str, Any]:
    command, env = client_command(client, asks, calls, sock)
    done = await trio.run_process(
        command,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=None if env is None else {**os.environ, **env},
        start_new_session=True,  # as a host in a terminal of its own
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("client", CLIENTS)
async def test_the_agent_s_user_is_asked_and_decides(tmp_path: Path, client: str) -> None:
    parsed, log = config(tmp_path)
    calls = [
        ["mcp__gh__create_issue", {"title": "please fix the login", "text": "yes"}],
        ["mcp__gh__create_issue", {"title": "rewrite everything", "text": "no"}],
        ["mcp__gh__delete_repo", {"repo": "web"}],
        ["mcp__gh__read", {"text": "free"}],
    ]
    with trio.fail_after(LIMIT):
        async with running(parsed) as daemon:
            seen = await run_client(client, "elicitation", calls, daemon.socket_path)
            await daemon.audit.flush()
    assert seen["version"] == VERSIONS[client]
    approved, denied, deny, allowed = seen["results"]
    assert approved == {"is_error": False, "text": ["create_issue:yes"]}
    assert denied["is_error"] is True
    assert "denied by the agent's user: not without a please" in denied["text"][0]
    assert deny["is_error"] is True and "does not allow calls" in deny["text"][0]
    assert allowed == {"is_error": False, "text": ["read:free"]}
    # The user was asked twice, about what would be called with which arguments.
    first, second = seen["asked"]
    assert (
        "Tool: mcp__gh__create_issue on the server 'gh', which calls it create_issue" in first
        and "please fix" in first
    )
    assert "issues need a person" in first and "rewrite everything" in second
    # Approving sent it once; denying, and the deny rule, never reached the server.
    assert [m["params"]["arguments"]["text"] for m in reached(log, "create_issue")] == ["yes"]
    assert reached(log, "delete_repo") == []
    records = list(AuditRecords(str(tmp_path / "state")))
    assert [(r.decision, r.decided_by, r.outcome) for r in records] == [
        ("approved", "the agent's user", "ok"),
        ("denied", "the agent's user", "refused"),
        ("deny", "policy[0]", "refused"),
        ("allow", "default", "ok"),
    ]
    era = "modern" if client == "python-2026" else "legacy"
    assert {r.agent.era for r in records} == {era}


@pytest.mark.parametrize("client", ["python-2026", "python-handshake", "typescript"])
async def test_the_user_is_shown_every_key_of_long_arguments(tmp_path: Path, client: str) -> None:
    parsed, log = config(tmp_path)
    long = {
        "title": "Fix typo in README",
        "body": "Small wording fix. " * 480,
        "repo": "acme/PRODUCTION-SECRETS",
        "force": True,
    }
    with trio.fail_after(LIMIT):
        async with running(parsed) as daemon:
            seen = await run_client(
                client, "elicitation", [["mcp__gh__create_issue", long]], daemon.socket_path
            )
    [question] = seen["asked"]
    [arguments] = [x for x in question.splitlines() if x.startswith("Arguments: ")]
    assert arguments.startswith('Arguments: {"title":"Fix typo in README","body":"Small wording')
    assert re.search(
        r'"…\(\d+ more characters\),"repo":"acme/PRODUCTION-SECRETS","force":true}$', arguments
    )
    # Without a please it was denied, and the server never saw it.
    [denied] = seen["results"]
    assert denied["is_error"] is True and "not without a please" in denied["text"][0]
    assert reached(log, "create_issue") == []


async def operator(daemon: Daemon, verb: str, *argv: str) -> str:
    """``mcpd approvals ...`` from another process, once a call waits: one apart from
    this test's, which connects to the daemon as an agent would in some tests."""
    approvals = daemon.approvals
    while not approvals.list():
        await approvals.wait_change(approvals.version)
    [waiting] = approvals.list()
    command = [sys.executable, "-m", "mcpd", "approvals", verb, waiting.id, *argv]
    done = await trio.run_process(
        [*APART, *command, "--socket", daemon.socket_path],
        capture_stdout=True,
        capture_stderr=True,
        stdin=subprocess.DEVNULL,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert waiting.id not in {v.id for v in approvals.list()}  # decided: waits no more
    return done.stdout.decode()


@pytest.mark.parametrize("client", ["python-2026", "python-handshake", "typescript"])
async def test_an_agent_that_cannot_be_asked_is_decided_by_the_operator(
    tmp_path: Path, client: str
) -> None:
    parsed, log = config(tmp_path)
    calls = [
        ["mcp__gh__create_issue", {"text": "approved"}],
        ["mcp__gh__create_issue", {"text": "denied"}],
    ]
    with trio.fail_after(LIMIT):
        async with running(parsed) as daemon:
            seen: dict[str, Any] = {}

            async def agent() -> None:
                seen.update(await run_client(client, "none", calls, daemon.socket_path))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent)
                said = await operator(daemon, "approve")
                assert "approved" in said and "gh/create_issue" in said
                said = await operator(daemon, "deny", "--reason", "one is enough")
            await daemon.audit.flush()
    assert seen["asked"] == []
    approved, denied = seen["results"]
    assert approved == {"is_error": False, "text": ["create_issue:approved"]}
    assert denied["is_error"] is True and "one is enough" in denied["text"][0]
    assert [m["params"]["arguments"]["text"] for m in reached(log, "create_issue")] == ["approved"]
    records = list(AuditRecords(str(tmp_path / "state")))
    assert [(r.decision, r.outcome) for r in records] == [
        ("approved", "ok"),
        ("denied", "refused"),
    ]
    assert all(r.decided_by.startswith("uid ") for r in records)


WAITERS = ["python-2026", "python-handshake", "typescript"]


@pytest.mark.parametrize("client", WAITERS)
async def test_a_tool_held_while_its_call_waits_is_not_called_once_approved(
    tmp_path: Path, client: str
) -> None:
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path) as setup:
            seen: dict[str, Any] = {}
            calls = [[SEARCH, {"query": "open bugs"}]]

            async def agent() -> None:
                seen.update(await run_client(client, "none", calls, setup.daemon.socket_path))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent)
                await setup.pending()
                await setup.change_tool()
                await operator(setup.daemon, "approve")
            records = await setup.records()
    [result] = seen["results"]
    assert result["is_error"] is True
    assert "the tool changed while the call waited for approval: it is held" in result["text"][0]
    assert setup.reached("search") == 0
    [record] = [r for r in records if r.name == SEARCH]
    assert (record.decision, record.outcome) == ("approved", "refused")


@pytest.mark.parametrize("client", WAITERS)
async def test_a_reload_ends_the_waits_it_denies_and_sends_once_those_it_allows(
    tmp_path: Path, client: str
) -> None:
    deny_search = {"tools": ["tickets/search"], "action": "deny", "reason": "not today"}
    allow_create = {"tools": ["tickets/create"], "action": "allow"}
    with trio.fail_after(LIMIT):
        async with waiting_daemon(tmp_path) as setup:
            seen: dict[str, Any] = {}
            calls = [[SEARCH, {"query": "x"}], [CREATE, {"query": "y"}]]

            async def agent() -> None:
                seen.update(await run_client(client, "none", calls, setup.daemon.socket_path))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent)
                [search] = await setup.pending()
                await setup.reload([deny_search, *ASK])
                # Ended at once: nobody is left to decide it.
                assert search.id not in {v["id"] for v in await setup.approvals_listed()}
                [create] = await setup.pending()
                assert create.tool == CREATE
                await setup.reload([allow_create, deny_search, *ASK])
                assert [v.id for v in setup.daemon.approvals.list()] == [create.id]
                await operator(setup.daemon, "approve")
            records = await setup.records()
    searched, created = seen["results"]
    assert searched["is_error"] is True
    assert "policy changed while the call to 'mcp__tickets__search' waited" in searched["text"][0]
    assert created == {"is_error": False, "text": ["called create"]}
    assert (setup.reached("search"), setup.reached("create")) == (0, 1)
    assert [(r.name, r.decision, r.decided_by, r.outcome) for r in records] == [
        (SEARCH, "deny", "policy[0]", "refused"),
        (CREATE, "allow", "policy[0]", "ok"),
    ]
