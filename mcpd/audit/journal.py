"""Each call's journal entry (``MCPD_EVENT=call``), through the logger ``mcpd.calls``:
at priority info, or notice for a call that did not succeed, so that ``journalctl -p
warning`` leaves them out; with fields to filter by (``MCPD_OUTCOME``,
``MCPD_DECISION``, ``MCPD_AGENT_PID``, ...).

The audit writer hands over a batch of records at a time, in its worker thread. They
are made into log records without what the logging module looks up for each (who
called it, the thread, the process), and given to each handler once for the batch:
mcpd's own handlers (``host.journal``) take the lock once and write lines together;
any other handler gets them one by one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Final

from protocol.logfields import log_extra

from ..host.journal import NOTICE, RateLimitedHandler
from .record import CallRecord

calls_logger: Final = logging.getLogger("mcpd.calls")
_MESSAGE: Final = "%s %s by %s: %s in %s (%s by %s)"
_LEVEL_NAMES: Final = {logging.INFO: "INFO", NOTICE: "NOTICE"}
_FILE: Final = os.path.basename(__file__)
_MODULE: Final = os.path.splitext(_FILE)[0]


def write(records: Iterable[CallRecord], now: float) -> None:
    """Each of ``records`` as a log record of ``now`` (the batch's time)."""
    logged = [entry for entry in (_entry(r, now) for r in records) if entry is not None]
    if not logged:
        return
    logger: logging.Logger | None = calls_logger
    while logger is not None:
        for handler in logger.handlers:
            if isinstance(handler, RateLimitedHandler):
                handler.handle_all(logged)
            else:
                for entry in logged:
                    if entry.levelno >= handler.level:
                        handler.handle(entry)
        logger = logger.parent if logger.propagate else None


class _Entry(logging.LogRecord):
    """A log record made without what the logging module looks up for each one (the
    caller's frame, the thread, the process): the batch's time is its time."""

    def __init__(self, level: int, args: tuple[object, ...], extra: dict[str, object], now: float):
        self.name = calls_logger.name
        self.msg = _MESSAGE
        self.args = args
        self.levelno = level
        self.levelname = _LEVEL_NAMES[level]
        self.pathname = __file__
        self.filename = _FILE
        self.module = _MODULE
        self.lineno = 0
        self.funcName = "write"
        self.created = now
        self.msecs = (now - int(now)) * 1000
        self.relativeCreated = 0.0
        self.exc_info = None
        self.exc_text = None
        self.stack_info = None
        self.thread = self.threadName = self.taskName = None
        self.process = self.processName = None
        self.__dict__.update(extra)


def _entry(record: CallRecord, now: float) -> logging.LogRecord | None:
    level = logging.INFO if record.outcome == "ok" else NOTICE
    if not calls_logger.isEnabledFor(level):
        return None
    agent = record.agent
    what = record.name or "-"
    if record.original and record.server:
        what += f" ({record.server}/{record.original})"
    outcome = record.outcome + (f": {record.reason}" if record.reason else "")
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
    took = f"{record.duration_ms:.0f} ms"
    words = (record.method, what, agent.label(), outcome, took, record.decision, record.decided_by)
    return _Entry(level, words, extra, now)
