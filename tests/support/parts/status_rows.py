"""The status document and its rows for tests of their readers (the status page,
``mcpd status``): a daemon, a server and a profile with nothing going on, with the
fields a test names set; and ``mcpd status`` as a person reads the daemon's answer."""

from __future__ import annotations

from typing import Any

import msgspec

from mcpd.cli.status_view import render_status
from mcpd.login_answers import LoginStatus
from mcpd.server_row import BreakerCounts, SandboxStatus, ServerRow
from mcpd.status_document import DaemonStatus, NamingShown, ProfileStatus, StatusDocument


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


def daemon(**fields: Any) -> DaemonStatus:
    row = DaemonStatus(
        version="",
        uptime_s=0.0,
        connections=0,
        tools=0,
        prompts=0,
        resources=0,
        max_tools=128,
        summary="",
        warnings=[],
    )
    return msgspec.structs.replace(row, **fields)


def profile(name: str, **fields: Any) -> ProfileStatus:
    row = ProfileStatus(
        name=name,
        discovery="all",
        mode="all",
        tools=0,
        listed=0,
        servers=[],
        pinned=[],
        naming=NamingShown(template="mcp__{alias}__{tool}", max_length=64),
        max_tools=128,
        socket=None,
        agents=0,
    )
    return msgspec.structs.replace(row, **fields)


def document(
    of: DaemonStatus | None = None,
    servers: list[ServerRow] | None = None,
    profiles: list[ProfileStatus] | None = None,
) -> StatusDocument:
    return StatusDocument(
        daemon=daemon() if of is None else of, servers=servers or [], profiles=profiles or []
    )


def status_text(answer: object, *, color: bool = False) -> str:
    """``mcpd status`` as a person reads it, of the daemon's answer to ``mcpd/status``
    (its JSON decoded)."""
    return render_status(msgspec.convert(answer, StatusDocument), color=color)


def filled(answer: dict[str, Any]) -> StatusDocument:
    """A status document of what ``answer`` (one as its JSON reads) says of the daemon
    and its servers, the fields it leaves out as a daemon and servers with nothing
    going on have them."""
    blank_daemon, blank_row = msgspec.to_builtins(daemon()), msgspec.to_builtins(server_row(""))
    whole = {
        "daemon": {**blank_daemon, **answer.get("daemon", {})},
        "servers": [{**blank_row, **row} for row in answer.get("servers", [])],
        "profiles": answer.get("profiles", []),
    }
    return msgspec.convert(whole, StatusDocument)


def login_row(server: str, **fields: Any) -> LoginStatus:
    """A server's login that waits for a person, with the fields a test names set."""
    row = LoginStatus(
        server=server,
        type="oauth",
        url=f"https://{server}.example/mcp",
        issuer=None,
        client_id=None,
        logged_in=False,
        needs_login=None,
        redirect_port=0,
        state="needs_login",
    )
    return msgspec.structs.replace(row, **fields)
