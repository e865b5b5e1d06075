"""A server's row in ``mcpd status`` for tests of its readers: one server, idle and
without calls, with the fields a test names set."""

from __future__ import annotations

from typing import Any

import msgspec

from mcpd.config.sandboxing.per_server import SandboxStatus
from mcpd.servers.status.row import BreakerCounts, ServerRow


def server_row(alias: str, **fields: Any) -> ServerRow:
    row = ServerRow(
        alias=alias,
        transport="stdio",
        state="stopped",
        era=None,
        protocol_version=None,
        server_info=None,
        list_cache_scope=None,
        tools=0,
        since=None,
        last_error=None,
        retry_at=None,
        restarts=0,
        breaker=BreakerCounts(state="closed", consecutive_failures=0, failures=0, opened=0),
        calls=0,
        errors=0,
        p50_ms=None,
        p95_ms=None,
        p99_ms=None,
        inflight=0,
        waiting=0,
        dropped_tools=[],
    )
    return msgspec.structs.replace(row, **fields)


def sandbox(level: str) -> SandboxStatus:
    """A sandbox of ``level`` that grants nothing."""
    return SandboxStatus(
        level=level,
        unprotected=None,
        home="/state/homes/s",
        read=[],
        write=[],
        network=True,
        host_loopback=[],
        limits={},
    )
