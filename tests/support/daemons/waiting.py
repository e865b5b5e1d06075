"""A daemon whose ``[[policy]]`` asks about the tools of a server that changes its
definitions (``servers/changing.py``), run from a config file so that a test can reload
other rules while a call waits for approval: for the tests of what a call that waited
meets once its wait is over."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from mcpd.audit.reader import AuditRecords
from mcpd.audit.record import CallRecord
from mcpd.config.loading.load import load
from mcpd.daemon import Daemon
from mcpd.status_document import PendingView
from tests.support.cli.apart import APART
from tests.support.clients.agent import connect, running
from tests.support.daemons.pins import TOOLS_CHANGED, Changing, relist

LIMIT = 60
SEARCH = "mcp__tickets__search"
CREATE = "mcp__tickets__create"
ASK: list[dict[str, Any]] = [{"tools": ["tickets/search", "tickets/create"], "action": "ask"}]


def write_config(
    tmp_path: Path, server: Changing, rules: list[dict[str, Any]], one_slot: bool = False
) -> Path:
    """The config file: the daemon's own keys, the server (taking one call at a time
    when ``one_slot``), ``rules``."""
    daemon = {
        "socket": str(tmp_path / "mcpd.sock"),
        "state_dir": str(tmp_path / "state"),
        "startup_deadline": 20.0,
        "audit_journal": False,
    }
    slots = {"max_concurrency": 1} if one_slot else {}
    lines = ["[daemon]", *_keys(daemon), "[servers.tickets]", *_keys(server.config(**slots))]
    for rule in rules:
        lines += ["[[policy]]", *_keys(rule)]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _keys(table: dict[str, Any]) -> list[str]:
    # What JSON writes of a string, a number, a boolean or a list of strings is TOML too.
    return [f"{key} = {json.dumps(value)}" for key, value in table.items()]


class Waiting:
    def __init__(self, daemon: Daemon, server: Changing, tmp_path: Path, one_slot: bool) -> None:
        self.daemon = daemon
        self.server = server
        self.tmp_path = tmp_path
        self.one_slot = one_slot

    def reached(self, tool: str) -> int:
        """How many calls of the server's tool ``tool`` reached it."""
        return self.server.reached().count(f"tools/call {tool}")

    async def pending(self, count: int = 1) -> list[PendingView]:
        """Once ``count`` calls wait for approval: them."""
        approvals = self.daemon.approvals
        while len(approvals.list()) < count:
            await approvals.wait_change(approvals.version)
        return approvals.list()

    async def reload(self, rules: list[dict[str, Any]]) -> None:
        """The operator writes ``rules`` into the config and reloads it."""
        write_config(self.tmp_path, self.server, rules, self.one_slot)
        await self.daemon.reload()

    async def change_tool(self) -> None:
        """The server says its search tool does something else, and announces it: mcpd
        holds the tool until a person approves it anew."""
        self.server.change()
        sock = self.daemon.socket_path
        async with connect(sock, modern=False) as watcher, connect(sock) as caller:
            await watcher.initialize()
            await relist(caller, watcher, (TOOLS_CHANGED,))
        entry = self.daemon.catalog.lookup(SEARCH)
        assert entry is not None and entry.held is not None

    async def approvals_listed(self) -> list[dict[str, Any]]:
        """What ``mcpd approvals --json`` lists, run as a person at another terminal."""
        command = ["approvals", "--json", "--socket", self.daemon.socket_path]
        done = await trio.run_process(
            [*APART, sys.executable, "-m", "mcpd", *command],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
        listed: list[dict[str, Any]] = json.loads(done.stdout)
        return listed

    async def records(self) -> list[CallRecord]:
        await self.daemon.audit.flush()
        return list(AuditRecords(str(self.tmp_path / "state")))


@asynccontextmanager
async def waiting_daemon(
    tmp_path: Path, rules: list[dict[str, Any]] = ASK, one_slot: bool = False
) -> AsyncIterator[Waiting]:
    """``one_slot``: the server takes one call at a time, and lists ``hold``, whose
    calls wait for ``server.tell("answer")``."""
    server = Changing(tmp_path, control=one_slot)
    path = write_config(tmp_path, server, rules, one_slot)
    async with running(load(path), str(path)) as daemon:
        yield Waiting(daemon, server, tmp_path, one_slot)
