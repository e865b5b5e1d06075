"""Structured fields for log records, shared by the transports and the daemon.

A record's ``extra`` carries which server it is about, what happened and why; the
daemon's journal handler turns these into ``MCPD_SERVER``, ``MCPD_EVENT``,
``MCPD_REASON`` and ``MCPD_STDERR`` journal fields, and the plain-text handler
ignores them. It lives here, below both, so neither has to reach into the other.
"""

from __future__ import annotations

from typing import Any


def log_extra(
    server: str | None,
    event: str | None = None,
    reason: str | None = None,
    stderr: list[str] | None = None,
) -> dict[str, Any]:
    """The ``extra`` for one log record."""
    extra: dict[str, Any] = {"mcpd_server": server} if server else {}
    if event:
        extra["mcpd_event"] = event
    if reason:
        extra["mcpd_reason"] = reason
    if stderr:
        extra["mcpd_stderr"] = "\n".join(stderr)
    return extra
