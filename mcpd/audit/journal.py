"""Each call's journal entry (``MCPD_EVENT=call``), as the logger ``mcpd.calls``: at
priority info, or notice for a call that did not succeed, so that ``journalctl -p
warning`` leaves them out; with fields to filter by (``MCPD_OUTCOME``,
``MCPD_DECISION``, ``MCPD_AGENT_PID``, ...).

The audit writer hands over a batch of records at a time, in its worker thread. Each
becomes an entry without the ``LogRecord`` the logging module would make (and all it
looks up for one: the caller's frame, the thread, the process): mcpd's own handlers
(``host.journal``) write them a batch at a time; any other handler gets them as
records, one by one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

from protocol.logfields import log_extra

from ..host.journal import RateLimitedHandler
from ..host.journalfields import NOTICE, Note
from .record import CallRecord

calls_logger: Final = logging.getLogger("mcpd.calls")


def write(records: Iterable[CallRecord], now: float) -> None:
    """Each of ``records`` as an entry of ``now`` (the batch's time)."""
    info, notice = calls_logger.isEnabledFor(logging.INFO), calls_logger.isEnabledFor(NOTICE)
    notes = [
        _note(r, level)
        for r in records
        if (info if (level := logging.INFO if r.outcome == "ok" else NOTICE) == logging.INFO
            else notice)
    ]  # fmt: skip
    if not notes:
        return
    logger: logging.Logger | None = calls_logger
    while logger is not None:
        for handler in logger.handlers:
            if isinstance(handler, RateLimitedHandler):
                handler.handle_notes(notes, now)
            else:
                for note in notes:
                    if note.levelno >= handler.level:
                        handler.handle(note.record(now))
        logger = logger.parent if logger.propagate else None


def _note(record: CallRecord, level: int) -> Note:
    agent = record.agent
    what = record.name or "-"
    if record.original and record.server:
        what += f" ({record.server}/{record.original})"
    outcome = record.outcome + (f": {record.reason}" if record.reason else "")
    message = (
        f"{record.method} {what} by {agent.label()}: {outcome} in {record.duration_ms:.0f} ms "
        f"({record.decision} by {record.decided_by})"
    )
    extra = log_extra(record.server, "call", record.reason)
    extra.update(
        mcpd_method=record.method,
        mcpd_tool=record.name,
        mcpd_outcome=record.outcome,
        mcpd_decision=record.decision,
        mcpd_decided_by=record.decided_by,
        mcpd_agent_uid=agent.uid,
        mcpd_agent_pid=agent.pid,
        mcpd_profile=agent.profile,
    )
    return Note(level, calls_logger.name, message, extra)
