"""A daemon in front of a 2026-07-28 server whose tool ``ask`` answers
``input_required`` (``servers/scripted.py``), or whose tool ``build`` answers with a task
that waits for input (``asking/task_server.py``), or another the test names, run from a
config file so that a test can reload other rules while an agent answers what the
server asked, and the agent that answers: for the tests of what a call sent again with
its agent's answers meets."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcpd.audit.reader import AuditRecords
from mcpd.audit.record import CallRecord
from mcpd.config.loading.load import load
from mcpd.daemon import Daemon
from tests.support.clients.agent import running
from tests.support.clients.answering import AnsweringAgent, connect_answering
from tests.support.system.procs import TASKS, scripted

LIMIT = 60
# A prompt and a resource template that ask for a name first, as the tool ``ask`` does.
PROMPT_AND_RESOURCE = ("--prompts", "1", "--templates", "1", "--ask-first")
ASK = "mcp__s__ask"
# What the server's question asks for, and a person's approval of a call.
NAME = {"action": "accept", "content": {"name": "mallory"}}
APPROVE = {"action": "accept", "content": {"decision": "approve"}}


def answer(method: str, params: Any) -> Any:
    """The agent's user: approves what mcpd asks about, and gives a name to the server."""
    schema = params.get("requestedSchema", {}) if isinstance(params, dict) else {}
    return APPROVE if "decision" in schema.get("properties", {}) else NAME


class Rounds:
    def __init__(self, daemon: Daemon, tmp_path: Path, server: tuple[str, ...]) -> None:
        self.daemon = daemon
        self.tmp_path = tmp_path
        self.server = server  # its command and arguments

    def reached(self, method: str = "tools/call", name: str = "ask") -> list[dict[str, Any]]:
        """The params of each ``method`` (a call of ``name``) that reached the server."""
        log = self.tmp_path / "server.in"
        lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
        return [
            m["params"]
            for m in lines
            if m.get("method") == method and (method != "tools/call" or m["params"]["name"] == name)
        ]

    async def reload(self, rules: list[dict[str, Any]], *more: str) -> None:
        """The operator writes ``rules`` (and the lines ``more``) into the config and
        reloads it."""
        write_config(self.tmp_path, rules, self.server, more)
        await self.daemon.reload()

    async def records(self, name: str = ASK) -> list[CallRecord]:
        await self.daemon.audit.flush()
        return [r for r in AuditRecords(str(self.tmp_path / "state")) if r.name == name]

    @asynccontextmanager
    async def agent(self) -> AsyncIterator[AnsweringAgent]:
        """A legacy agent that declared form elicitation, whose user answers only when
        the test says so (``answer_held``)."""
        async with connect_answering(self.daemon.socket_path, False, answer) as agent:
            agent.hold = True
            await agent.initialize_with({"elicitation": {}})
            yield agent


def server_of(tmp_path: Path, tasks: bool) -> tuple[str, ...]:
    """The command and arguments of the server a test of rounds runs by default."""
    log = str(tmp_path / "server.in")
    if tasks:
        return sys.executable, TASKS, log
    command, args = scripted(
        "--era", "modern", "--names", "ask", "--log-file", log, *PROMPT_AND_RESOURCE
    )
    return command, *args


def write_config(
    tmp_path: Path,
    rules: list[dict[str, Any]],
    server: tuple[str, ...],
    more: tuple[str, ...] = (),
) -> Path:
    command, *args = server
    lines = [
        "[daemon]",
        f"socket = {json.dumps(str(tmp_path / 'mcpd.sock'))}",
        f"state_dir = {json.dumps(str(tmp_path / 'state'))}",
        "startup_deadline = 20.0",
        "audit_journal = false",
        "[servers.s]",
        f"command = {json.dumps(command)}",
        f"args = {json.dumps(args)}",
        *more,
    ]
    for rule in rules:
        # What JSON writes of a string or a list of strings is TOML too.
        lines += ["[[policy]]", *(f"{k} = {json.dumps(v)}" for k, v in rule.items())]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@asynccontextmanager
async def rounds_daemon(
    tmp_path: Path,
    rules: list[dict[str, Any]],
    tasks: bool = False,
    server: tuple[str, ...] = (),
) -> AsyncIterator[Rounds]:
    """``tasks``: in front of ``asking/task_server.py``, not ``servers/scripted.py``;
    ``server``: in front of the server this command and arguments run instead."""
    server = server or server_of(tmp_path, tasks)
    path = write_config(tmp_path, rules, server)
    async with running(load(path), str(path)) as daemon:
        yield Rounds(daemon, tmp_path, server)
