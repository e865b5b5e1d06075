"""Logging for mcpd: journald's native protocol with mcpd's fields, or readable lines.

Code logs through stdlib ``logging`` and attaches structure with
``extra=protocol.shown.logfields.log_extra(server, event, reason, stderr)``. Under systemd every
record becomes one journal entry with ``MCPD_SERVER``, ``MCPD_EVENT``, ``MCPD_REASON``
and ``MCPD_STDERR`` next to ``MESSAGE`` and ``PRIORITY``, so that
``journalctl -u mcpd MCPD_EVENT=outage`` and ``journalctl -u mcpd MCPD_SERVER=tickets``
work. Elsewhere each record is one line on stderr. ``logsetup`` chooses between them.

A log that cannot be written costs its entries, never the daemon: with journald gone
and stderr a dead stream, records are counted, and said once something takes entries
again.
"""

from __future__ import annotations

import array
import collections
import contextlib
import datetime
import errno
import fcntl
import logging
import os
import socket
import sys
from typing import TextIO

from protocol.shown.logfields import log_extra
from protocol.shown.visible import visible

from .journalfields import (
    IDENTIFIER,
    encode_entry,
    extra,
    log_text,
    message_of,
    record_fields,
    syslog_priority,
    unnamed,
)
from .ratelimit import StderrRateLimiter

JOURNAL_SOCKET = "/run/systemd/journal/socket"
# How many warnings (or worse) journald had no room for are held to be sent once it has:
# a flood of them is what the count of those dropped is for.
HELD_WARNINGS = 64

# What mcpd says of entries it could not send: how many, why, and of what kind.
_COUNTED = "%d log entries dropped: %s (%s)"

# --- handlers ----------------------------------------------------------------------------


class RateLimitedHandler(logging.Handler):
    def __init__(self, limiter: StderrRateLimiter | None = None) -> None:
        super().__init__()
        self.limiter = limiter or StderrRateLimiter()

    def emit(self, record: logging.LogRecord) -> None:
        for admitted in self.limiter.admit(record):
            try:
                self.write(admitted)
            except Exception:
                self.handleError(admitted)

    def write(self, record: logging.LogRecord) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.acquire()
        try:
            for summary in self.limiter.pending_summaries():
                try:
                    self.write(summary)
                except Exception:
                    self.handleError(summary)
        finally:
            self.release()
        super().close()


class LineHandler(RateLimitedHandler):
    """One readable line per record: time, level, [server] event: message.

    With ``syslog_prefix`` the time is left out and each line starts with ``<N>``: that
    is the form journald's stdout/stderr stream parses into PRIORITY, used when we are
    connected to journald but cannot use its native socket.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        syslog_prefix: bool = False,
        limiter: StderrRateLimiter | None = None,
    ) -> None:
        super().__init__(limiter)
        self.stream = stream
        self.syslog_prefix = syslog_prefix
        self._second = -1
        self._stamp_text = ""

    def format_record(self, record: logging.LogRecord) -> str:
        named = extra(record, "mcpd_server")
        server = str(named) if named else None
        event = extra(record, "mcpd_event")
        given = extra(record, "mcpd_reason")
        message = message_of(record)
        said = unnamed(server, message) if server else message
        first, *rest = said.split("\n")
        head = ""
        if server:
            head += f"[{server}] "
        if event:
            head += f"{event}: "
        line = head + first
        if given and not _told(str(given), server, said, first):
            # Within the first line: its own line breaks are shown, not made.
            line += f" ({visible(str(given))})"
        more = [f"    | {text}" for text in rest]
        tail = extra(record, "mcpd_stderr")
        if tail and event != "stderr":
            more += [f"    stderr| {text}" for text in log_text(tail).split("\n")]
        if self.syslog_prefix:
            prefix = f"<{syslog_priority(record.levelno)}>"
            return "".join(f"{prefix}{text}\n" for text in [line, *more])
        lead = f"{self._stamp(record.created)}.{int(record.msecs):03d} {record.levelname:<8} "
        return "".join(f"{text}\n" for text in [lead + line, *more])

    def _stamp(self, created: float) -> str:
        # Formatted once a second, not once a line: a busy daemon logs every call.
        second = int(created)
        if second != self._second:
            self._second = second
            moment = datetime.datetime.fromtimestamp(second)
            self._stamp_text = moment.strftime("%Y-%m-%d %H:%M:%S")
        return self._stamp_text

    def write(self, record: logging.LogRecord) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        stream.write(self.format_record(record))
        stream.flush()

    def head(self, levelno: int, created: float) -> str:
        """What a line of ``levelno`` made at ``created`` starts with, before its
        ``[server] event: message``."""
        if self.syslog_prefix:
            return f"<{syslog_priority(levelno)}>"
        millis = int((created - int(created)) * 1000)
        return f"{self._stamp(created)}.{millis:03d} {logging.getLevelName(levelno):<8} "

    def write_lines(self, text: str) -> None:
        """Lines made elsewhere (each a ``head`` and what follows it, and a line feed),
        written at once: the calls of a batch, without a record each."""
        self.acquire()
        try:
            stream = self.stream if self.stream is not None else sys.stderr
            stream.write(text)
            stream.flush()
        except Exception:
            self.handleError(logging.makeLogRecord({"msg": "audit lines"}))
        finally:
            self.release()


def _told(reason: str, server: str | None, said: str, first: str) -> bool:
    """Whether a line's message says its ``reason`` already: in its first line as that
    line shows it, or, a reason of several lines, in the lines the message makes."""
    reason = unnamed(server, reason) if server else reason
    return visible(reason) in first or reason in said


class JournalHandler(RateLimitedHandler):
    """Writes each record as one entry to journald's native socket.

    Entries too big for one datagram go through a sealed memfd, as the protocol allows,
    so large tracebacks and stderr tails arrive whole (fields are still capped at
    MAX_FIELD_BYTES). When the socket cannot be used at all the record is written to
    ``fallback`` as a ``<N>``-prefixed line instead, so nothing is lost silently; when
    that stream cannot take it either (journald stopped, the stream it gave us with it),
    it is counted (``lost``), and the first entry the socket or the stream takes again
    says how many, as it says of those dropped.

    A send never waits: records are made on the event loop's thread, so a wait for
    room in journald's queue (journald busy, or slower than a flood) would stall every
    server and agent with it. An entry the socket will not take now is dropped and
    counted (``dropped``), except a warning or worse, which is held, a few at most, and
    sent first once the socket takes entries again; then an entry of mcpd's own
    (``MCPD_EVENT=dropped``, a warning) says how many were dropped, and of what kind.
    """

    def __init__(
        self,
        path: str = JOURNAL_SOCKET,
        *,
        fallback: LineHandler | None = None,
        limiter: StderrRateLimiter | None = None,
    ) -> None:
        super().__init__(limiter)
        self.path = path
        self.identifier = IDENTIFIER
        self.fallback = fallback or LineHandler(syslog_prefix=True)
        self.dropped = 0
        self._dropped_warnings = 0  # of ``dropped``: warnings or worse
        self._dropped_calls = 0  # of ``dropped``: calls' audit entries
        self.lost = 0  # neither the socket nor the fallback could take them
        self._lost_warnings = 0
        self._lost_calls = 0
        self._held: collections.deque[bytes] = collections.deque()  # warnings or worse
        self._failed = False
        # Unconnected: each send names the path, so a restarted journald is picked up.
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        # A bigger send buffer means fewer entries need the memfd path (the kernel caps it).
        with contextlib.suppress(OSError):
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)

    def write(self, record: logging.LogRecord) -> None:
        data = encode_entry(record_fields(record, self.identifier))
        try:
            self._offer(data, warning=record.levelno >= logging.WARNING)
        except OSError as exc:
            self._fall_back(record, exc)
            return
        self._failed = False

    def _fall_back(self, record: logging.LogRecord, exc: OSError) -> None:
        """``record`` as a line on the fallback stream, after saying (once, until the
        socket takes entries again) that the socket cannot be used, and how many
        entries neither could take; counted among those when the stream cannot take it
        either (journald stopped, its stream with it)."""
        said = []
        if not self._failed:
            unusable = "journal socket %s unusable (%s); logging to stderr"
            said.append(_warning(unusable, self.path, exc, event=None))
        if self.lost:
            said.append(_warning(_COUNTED, self.lost, *self._lost_why()))
        try:
            for line in [*said, record]:
                self.fallback.write(line)
        except (OSError, ValueError):  # a broken pipe, or a stream closed
            self.lost += 1
            self._lost_warnings += record.levelno >= logging.WARNING
            self._lost_calls += extra(record, "mcpd_event") == "call"
            return
        self._failed = True
        self.lost = self._lost_warnings = self._lost_calls = 0

    def send_entry(self, data: bytes) -> bool:
        """A call's audit entry encoded elsewhere (``encode_entry``), sent as ``write``
        sends a record's; False when the socket cannot be used, and the caller writes
        the record instead (which falls back to stderr). The caller holds the lock."""
        try:
            self._offer(data, call=True)
        except OSError:
            return False
        return True

    def _offer(self, data: bytes, *, warning: bool = False, call: bool = False) -> None:
        """Send ``data`` after what waits to be sent, or hold or drop it if the socket
        has no room now; raises OSError when the socket cannot be used."""
        try:
            self._catch_up()
            self._send(data)
        except BlockingIOError:  # no room in journald's queue now
            if warning and len(self._held) < HELD_WARNINGS:
                self._held.append(data)
                return
            self.dropped += 1
            self._dropped_warnings += warning
            self._dropped_calls += call

    def _catch_up(self) -> None:
        """The warnings held, then what says how many entries were dropped; raises
        BlockingIOError while the socket has no room for them."""
        while self._held:
            self._send(self._held[0])
            self._held.popleft()
        if self.dropped:
            why = "journald was not keeping up"
            kinds = _kinds(self._dropped_warnings, self._dropped_calls)
            self._send(self._count_entry(self.dropped, why, kinds))
            self.dropped = self._dropped_warnings = self._dropped_calls = 0
        if self.lost:
            self._send(self._count_entry(self.lost, *self._lost_why()))
            self.lost = self._lost_warnings = self._lost_calls = 0

    def _lost_why(self) -> tuple[str, str]:
        why = "neither journald nor stderr could take them"
        return why, _kinds(self._lost_warnings, self._lost_calls)

    def _count_entry(self, count: int, why: str, kinds: str) -> bytes:
        """mcpd's own entry saying how many entries were not sent, and why."""
        notice = _warning(_COUNTED, count, why, kinds)
        fields = [*record_fields(notice, self.identifier), ("MCPD_DROPPED", str(count))]
        return encode_entry(fields)

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendto(data, self.path)
        except OSError as exc:
            if exc.errno not in (errno.EMSGSIZE, errno.ENOBUFS):
                raise
            self._send_memfd(data)

    def _send_memfd(self, data: bytes) -> None:
        fd = os.memfd_create("mcpd-journal", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            # journald only accepts a memfd that can no longer change under it.
            fcntl.fcntl(
                fd,
                fcntl.F_ADD_SEALS,
                fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL,
            )
            rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]).tobytes())]
            self._sock.sendmsg([], rights, 0, self.path)
        finally:
            os.close(fd)

    def close(self) -> None:
        super().close()
        self._sock.close()


def _warning(msg: str, *args: object, event: str | None = "dropped") -> logging.LogRecord:
    """A warning of mcpd's own about its log."""
    fields = {"levelno": logging.WARNING, "levelname": "WARNING", "msg": msg, "args": args}
    return logging.makeLogRecord({**fields, **log_extra(None, event)})


def _kinds(warnings: int, calls: int) -> str:
    said = f"{warnings} warnings or worse"
    return said + (f"; {calls} call records, which the audit file keeps" if calls else "")
