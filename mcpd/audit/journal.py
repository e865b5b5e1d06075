"""Each call's journal entry (``MCPD_EVENT=call``), as the logger ``mcpd.calls``: at
priority info, or notice for a call that did not succeed, so that ``journalctl -p
warning`` leaves them out; with fields to filter by (``MCPD_OUTCOME``,
``MCPD_DECISION``, ``MCPD_AGENT_PID``, ...).

The audit writer hands over a batch of records at a time, in its worker thread. Each
becomes an entry without the ``LogRecord`` the logging module would make (and all it
looks up for one: the caller's frame, the thread, the process): mcpd's own handlers
(``local.journal``) write them a batch at a time; any other handler gets them as
records, one by one.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import Any, Final

from ..local.journal import RateLimitedHandler
from ..local.journalfields import IDENTIFIER, NOTICE, Note, shown
from ..policy.agent import AgentInfo
from .record import CallRecord

LOGGER: Final = "mcpd.calls"
calls_logger: Final = logging.getLogger(LOGGER)


def write(records: Iterable[CallRecord], now: float) -> None:
    """Each of ``records`` as an entry of ``now`` (the batch's time)."""
    notes: list[Note]
    if calls_logger.isEnabledFor(logging.INFO):  # and so for NOTICE, above it
        notes = [_CallNote(r, logging.INFO if r.outcome == "ok" else NOTICE) for r in records]
    elif calls_logger.isEnabledFor(NOTICE):
        notes = [_CallNote(r, NOTICE) for r in records if r.outcome != "ok"]
    else:
        return
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


# An agent's label, worked out once for all its calls (an agent makes many).
_label: Final = functools.lru_cache(maxsize=256)(AgentInfo.label)


class _CallNote(Note):
    __slots__ = ("_record",)

    def __init__(self, record: CallRecord, level: int) -> None:
        # Set here rather than by ``Note.__init__``: one is made for every call.
        self.levelno, self.logger, self.server, self.event = level, LOGGER, record.server, "call"
        self._record = record

    def message(self) -> str:
        r = self._record
        what = (
            f"{r.name or '-'} ({r.server}/{r.original})"
            if r.original and r.server
            else (r.name or "-")
        )
        outcome = f"{r.outcome}: {r.reason}" if r.reason else r.outcome
        return (
            f"{r.method} {what} by {_label(r.agent)}: {outcome} in {r.duration_ms:.0f} ms "
            f"({r.decision} by {r.decided_by})"
        )

    def fields(self, identifier: str = IDENTIFIER) -> list[tuple[str, str]]:
        # What ``Note.fields`` makes of ``extra()``, in its order, without the dict and
        # the lookups of each name (an entry for every call).
        r, server = self._record, self.server
        message = shown(self.message())
        fields = [
            ("MESSAGE", f"{server}: {message}" if server else message),
            ("PRIORITY", "6" if self.levelno == logging.INFO else "5"),
            ("SYSLOG_IDENTIFIER", identifier),
            ("LOGGER", LOGGER),
            ("MCPD_EVENT", "call"),
        ]
        if server:
            fields.append(("MCPD_SERVER", server))
        for name, value in (
            ("MCPD_REASON", r.reason),
            ("MCPD_METHOD", r.method),
            ("MCPD_TOOL", r.name),
            ("MCPD_OUTCOME", r.outcome),
            ("MCPD_DECISION", r.decision),
            ("MCPD_DECIDED_BY", r.decided_by),
        ):
            if value:
                fields.append((name, shown(value)))
        agent = r.agent
        if agent.uid is not None:
            fields.append(("MCPD_AGENT_UID", str(agent.uid)))
        if agent.pid is not None:
            fields.append(("MCPD_AGENT_PID", str(agent.pid)))
        if agent.profile:
            fields.append(("MCPD_PROFILE", shown(agent.profile)))
        return fields

    def extra(self) -> dict[str, Any]:
        r = self._record
        agent = r.agent
        return {
            "mcpd_reason": r.reason,
            "mcpd_method": r.method,
            "mcpd_tool": r.name,
            "mcpd_outcome": r.outcome,
            "mcpd_decision": r.decision,
            "mcpd_decided_by": r.decided_by,
            "mcpd_agent_uid": agent.uid,
            "mcpd_agent_pid": agent.pid,
            "mcpd_profile": agent.profile,
        }
