"""Structured fields for log records, shared by the transports and the daemon.

A record's ``extra`` carries which server it is about, what happened and why; the
daemon's journal handler turns these into ``MCPD_SERVER``, ``MCPD_EVENT``,
``MCPD_REASON`` and ``MCPD_STDERR`` journal fields (and, for what is said of one
tool, prompt or template of a server, ``MCPD_ITEM`` and ``MCPD_KIND``), and the
plain-text handler ignores them. It lives here, below both, so neither has to reach into the other.
"""

from __future__ import annotations


def log_extra(
    server: str | None,
    event: str | None = None,
    reason: str | None = None,
    stderr: list[str] | None = None,
    *,
    item: str | None = None,
    kind: str | None = None,
) -> dict[str, str]:
    """The ``extra`` for one log record; ``item`` and ``kind``: the server's name for
    the item it is about ("search"), and what it is ("tool")."""
    extra: dict[str, str] = {"mcpd_server": server} if server else {}
    if event:
        extra["mcpd_event"] = event
    if reason:
        extra["mcpd_reason"] = reason
    if stderr:
        extra["mcpd_stderr"] = "\n".join(stderr)
    if item is not None:
        extra["mcpd_item"] = item
    if kind is not None:
        extra["mcpd_kind"] = kind
    return extra
