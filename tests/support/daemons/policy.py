"""A daemon with ``[[policy]]`` rules in front of one scripted server, for the policy's
daemon tests: the server's log of what reached it, the audit records, the approvals
waiting."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcpd.audit.reader import AuditRecords
from mcpd.audit.record import CallRecord
from mcpd.config.loading.load import parse_config
from mcpd.daemon import Daemon
from mcpd.status_document import PendingView
from tests.support.clients.agent import running
from tests.support.system.procs import scripted

LIMIT = 30
TOOLS = "delete_repo,create_issue,read_repo,merge"
RULES: list[dict[str, Any]] = [
    {"tools": ["*/delete_*"], "action": "deny", "reason": "deleting is done by people"},
    {"tools": ["gh/create_issue"], "action": "ask", "reason": "issues need a person"},
    {"tools": ["gh/merge"], "action": "ask", "timeout": 0.5},
    {"tools": ["gh/read_repo"], "action": "allow", "rate": "2/min"},
]


class Setup:
    def __init__(self, daemon: Daemon, log: Path, state: Path) -> None:
        self.daemon = daemon
        self.log = log
        self.state = state

    def reached(self, tool: str) -> list[dict[str, Any]]:
        """The tools/call requests of ``tool`` the server got."""
        lines = [json.loads(x) for x in self.log.read_text().splitlines() if x.strip()]
        return [m for m in lines if m.get("method") == "tools/call" and m["params"]["name"] == tool]

    async def records(self) -> list[CallRecord]:
        await self.daemon.audit.flush()
        return list(AuditRecords(str(self.state)))

    async def pending(self, count: int = 1) -> list[PendingView]:
        """Once ``count`` calls wait for approval: them."""
        approvals = self.daemon.approvals
        while len(approvals.list()) < count:
            await approvals.wait_change(approvals.version)
        return approvals.list()

    async def none_pending(self) -> None:
        approvals = self.daemon.approvals
        while approvals.list():
            await approvals.wait_change(approvals.version)


@asynccontextmanager
async def policy_daemon(
    tmp_path: Path,
    rules: list[dict[str, Any]] = RULES,
    daemon_keys: dict[str, Any] | None = None,
    tools: str = TOOLS,
    **profiles: Any,
) -> AsyncIterator[Setup]:
    """The daemon, with ``daemon_keys`` added to its ``[daemon]`` table; its server
    ``gh`` lists ``tools`` (names, comma-separated)."""
    log = tmp_path / "server.in"
    command, args = scripted("--names", tools, "--log-file", str(log))
    config = parse_config(
        {
            "daemon": {
                "socket": str(tmp_path / "mcpd.sock"),
                "state_dir": str(tmp_path / "state"),
                "startup_deadline": 20.0,
                "audit_journal": False,
                **(daemon_keys or {}),
            },
            "servers": {"gh": {"command": command, "args": list(args), "max_concurrency": 1}},
            "profiles": profiles,
            "policy": rules,
        }
    )
    async with running(config) as daemon:
        yield Setup(daemon, log, tmp_path / "state")


def text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"])
