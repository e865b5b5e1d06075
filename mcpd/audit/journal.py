"""Each call's journal entry (``MCPD_EVENT=call``), as the logger ``mcpd.calls``: at
priority info, or notice for a call that did not succeed, so that ``journalctl -p
warning`` leaves them out; with fields to filter by (``MCPD_OUTCOME``,
``MCPD_DECISION``, ``MCPD_AGENT_PID``, ...).

The journal is for people and alerts, and the audit file for the record: past a
budget (``BURST`` at once, then ``RATE`` a second, for the calls that succeeded and
for the others apart) calls are counted instead of logged, and one entry every
``SUMMARY_EVERY`` seconds at most says how many, and whether the file holds them: it
does not when it is off (``audit = false``) or could not take their batch (a full
disk), and the entry says so rather than send the reader to a record that is not there.
The budget holds then too: journald's own would otherwise drop mcpd's outage warnings.

The audit writer hands over a batch of records at a time, in its worker thread. mcpd's
own handlers get them without the ``LogRecord`` the logging module would make for
each (and all it looks up for one: the caller's frame, the thread, the process): the
line handler the batch's lines in one write, the journal handler each call's entry
encoded from the record. Any other handler gets records, one by one, that say the same.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from itertools import islice
from operator import attrgetter
from typing import Final

from protocol.pacing.buckets import Bucket
from protocol.shown.visible import visible

from ..local.service.journal import JournalHandler, LineHandler
from ..local.service.journalfields import IDENTIFIER, NOTICE, encode_entry
from ..policy.agent import AgentInfo
from .record import CallRecord

LOGGER: Final = "mcpd.calls"
_outcome: Final = attrgetter("outcome")
calls_logger: Final = logging.getLogger(LOGGER)
INFO: Final = logging.INFO


# Entries a second, after a burst, for the calls that succeeded and for the others
# (each their own budget: a flood of either never hides the other). journald drops a
# service's entries past its own budget (RateLimitBurst), and with them mcpd's outage
# warnings; the file, while on and written, holds every call.
BURST: Final = 500
RATE: Final = 50.0
# At most one entry this often says how many calls were not logged one by one.
SUMMARY_EVERY: Final = 10.0


class CallJournal:
    """The calls' entries, within their budget."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        start = clock()
        self._ok = Bucket(tokens=float(BURST), stamp=start)
        self._other = Bucket(tokens=float(BURST), stamp=start)
        self._summarized = start
        # Of the calls left out since the last summary, those the file did not take.
        self._unfiled_off = 0
        self._unfiled_failed = 0

    def write(self, records: list[CallRecord], now: float, filed: int | None) -> None:
        """Each of ``records`` as an entry of ``now`` (the batch's time), as far as the
        budget goes; ``filed``: how many of them, from the first, the audit file took
        (None: it is off)."""
        if not calls_logger.isEnabledFor(NOTICE):  # and so for INFO, below it
            return
        clock = self._clock()
        # Counted first: past the budget, which is most of a busy minute, no record is
        # looked at one by one.
        ok = list(map(_outcome, records)).count("ok")
        chosen: list[CallRecord] = []
        taken = self._ok.take_some(clock, BURST, RATE, ok)
        if ok == len(records):  # all succeeded, as in most batches: none looked at again
            chosen += records[:taken]
        elif taken:
            chosen += islice((r for r in records if r.outcome == "ok"), taken)
        if ok < len(records):
            taken = self._other.take_some(clock, BURST, RATE, len(records) - ok)
            if taken:
                chosen += islice((r for r in records if r.outcome != "ok"), taken)
        if chosen:
            _write(chosen, now)
        if len(chosen) < len(records):
            if filed is None:
                self._unfiled_off += len(records) - len(chosen)
            elif filed < len(records):
                logged = set(map(id, chosen))
                self._unfiled_failed += sum(id(r) not in logged for r in records[filed:])
        if clock - self._summarized >= SUMMARY_EVERY:
            self.summarize(clock)

    def summarize(self, clock: float | None = None) -> None:
        """Say how many calls were left out since the last time (at once when the
        daemon stops)."""
        ok, other = self._ok.suppressed, self._other.suppressed
        self._summarized = self._clock() if clock is None else clock
        if not ok and not other:
            return
        self._ok.suppressed = self._other.suppressed = 0
        off, failed = self._unfiled_off, self._unfiled_failed
        self._unfiled_off = self._unfiled_failed = 0
        calls_logger.log(
            NOTICE if other or failed else INFO,
            "%d calls not logged one by one (%d succeeded, %d did not): more than %g a second; %s",
            ok + other,
            ok,
            other,
            RATE,
            _where(ok + other, off, failed),
            extra={"mcpd_event": "call", "mcpd_suppressed": ok + other},
        )


def _where(left_out: int, off: int, failed: int) -> str:
    """Where the calls left out of the journal are on record, and where not."""
    unfiled = off + failed
    if not unfiled:
        return "every call is in the audit log (mcpd calls)"
    if unfiled == left_out and not failed:
        return "the audit log is off: they are in no record"
    if unfiled == left_out and not off:
        return "the audit log could not write them: they are in no record"
    why = [f"was off for {off}" if off else "", f"could not write {failed}" if failed else ""]
    return f"the audit log {' and '.join(filter(None, why))} of them, which are in no record" + (
        "" if unfiled == left_out else "; the others are in it (mcpd calls)"
    )


def _write(records: list[CallRecord], now: float) -> None:
    lowest = INFO if calls_logger.isEnabledFor(INFO) else NOTICE
    logger: logging.Logger | None = calls_logger
    while logger is not None:
        for handler in logger.handlers:
            level = max(lowest, handler.level)
            if level > NOTICE:
                continue
            wanted = records if level <= INFO else [r for r in records if r.outcome != "ok"]
            if wanted:
                hand_over(handler, wanted, now)
        logger = logger.parent if logger.propagate else None


def journal_priority(record: CallRecord) -> int:
    return INFO if record.outcome == "ok" else NOTICE


def hand_over(handler: logging.Handler, records: list[CallRecord], now: float) -> None:
    """``records`` (each of a level ``handler`` takes) to ``handler``. A handler that
    fails costs the entries, as ``logging`` has it (``handleError``): the calls go on,
    and the audit file has their records."""
    try:
        _hand_over(handler, records, now)
    except Exception:
        handler.handleError(logging.makeLogRecord({"name": LOGGER, "msg": "calls' entries"}))


def _hand_over(handler: logging.Handler, records: list[CallRecord], now: float) -> None:
    if isinstance(handler, LineHandler):
        heads = (handler.head(NOTICE, now), handler.head(INFO, now))  # by "ok"
        handler.write_lines("".join([f"{heads[r.outcome == 'ok']}{line(r)}\n" for r in records]))
    elif isinstance(handler, JournalHandler):
        identifier = handler.identifier
        handler.acquire()
        try:
            for r in records:
                if not handler.send_entry(encode_entry(fields(r, identifier))):
                    handler.write(log_record(r, now))  # the record's way, to the fallback
        finally:
            handler.release()
    else:
        for r in records:
            handler.handle(log_record(r, now))


def journal_message(r: CallRecord) -> str:
    """``tools/call mcp__t__open (t/open) by pid 42 (claude), ...: ok in 3 ms (allow by
    default)``, on one line whatever it holds: the server's and the agent's text in it
    with every control character shown as its escape (``visible``). A name or reason
    with a line break would otherwise start a line of its own choosing, which reads as
    another call's entry in a file of lines and in journalctl alike."""
    key = (r.agent, r.method, r.name, r.server, r.original)
    subject = _subjects.get(key)
    if subject is None:
        subject = _subjects.keep(key, _subject(r))
    reason, by = r.reason, r.decided_by
    return visible(
        f"{subject}{r.outcome}{': ' + reason if reason else ''} in {r.duration_ms:.0f} ms "
        f"({r.decision + ' by ' + by if by else 'no decision'})"
    )


def _subject(r: CallRecord) -> str:
    name, server, original = r.name or "-", r.server, r.original
    what = f"{name} ({server}/{original})" if original and server else name
    return f"{r.method} {what} by {r.agent.label()}: "


# What a message starts with, by agent and what it called: worked out once for the many
# calls of each (in the writer's thread only). Names an agent made up need not stay:
# past so many, or so many characters (a record keeps a name of thousands whole), the
# cache starts again.
_SUBJECTS: Final = 1024
_SUBJECT_CHARACTERS: Final = 256 * 1024
_Key = tuple[AgentInfo, str, str | None, str | None, str | None]


class _Subjects(dict[_Key, str]):
    __slots__ = ("held",)

    def __init__(self) -> None:
        super().__init__()
        self.held = 0  # characters of the subjects (their keys' names are in them too)

    def keep(self, key: _Key, subject: str) -> str:
        if len(self) >= _SUBJECTS or self.held + len(subject) > _SUBJECT_CHARACTERS:
            self.clear()
            self.held = 0
        self[key] = subject
        self.held += len(subject)
        return subject


_subjects: Final = _Subjects()


def line(r: CallRecord) -> str:
    """What a call's line says after its time and level."""
    server, text = r.server, journal_message(r)
    return f"[{server}] call: {text}" if server else f"call: {text}"


def fields(r: CallRecord, identifier: str = IDENTIFIER) -> list[tuple[str, str]]:
    """The call's journal entry: what ``journalfields.record_fields`` makes of the
    record ``log_record`` makes, but its source location, in the same order."""
    server, text = r.server, journal_message(r)
    out = [
        ("MESSAGE", f"{server}: {text}" if server else text),
        ("PRIORITY", "6" if r.outcome == "ok" else "5"),
        ("SYSLOG_IDENTIFIER", identifier),
        ("LOGGER", LOGGER),
        ("MCPD_EVENT", "call"),
    ]
    if server:
        out.append(("MCPD_SERVER", server))
    for name, value in (
        ("MCPD_REASON", r.reason),
        ("MCPD_METHOD", r.method),
        ("MCPD_TOOL", r.name),
        ("MCPD_OUTCOME", r.outcome),
        ("MCPD_DECISION", r.decision),
        ("MCPD_DECIDED_BY", r.decided_by),
    ):
        if value:
            out.append((name, visible(value)))
    agent = r.agent
    if agent.uid is not None:
        out.append(("MCPD_AGENT_UID", str(agent.uid)))
    if agent.pid is not None:
        out.append(("MCPD_AGENT_PID", str(agent.pid)))
    if agent.profile:
        out.append(("MCPD_PROFILE", visible(agent.profile)))
    return out


def log_record(r: CallRecord, created: float) -> logging.LogRecord:
    """The call as a ``LogRecord`` made at ``created``, for any other handler."""
    agent, level = r.agent, journal_priority(r)
    return logging.makeLogRecord(
        {
            "name": LOGGER,
            "levelno": level,
            "levelname": logging.getLevelName(level),
            "msg": journal_message(r),
            "created": created,
            "msecs": (created - int(created)) * 1000,
            "mcpd_event": "call",
            "mcpd_reason": r.reason,
            "mcpd_method": r.method,
            "mcpd_tool": r.name,
            "mcpd_outcome": r.outcome,
            "mcpd_decision": r.decision,
            "mcpd_decided_by": r.decided_by,
            "mcpd_agent_uid": agent.uid,
            "mcpd_agent_pid": agent.pid,
            "mcpd_profile": agent.profile,
            "mcpd_server": r.server,
        }
    )
