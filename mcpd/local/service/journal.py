"""Logging for mcpd: journald's native protocol with mcpd's fields, or readable lines.

Code logs through stdlib ``logging`` and attaches structure with
``extra=protocol.shown.logfields.log_extra(server, event, reason, stderr)``. Under systemd every
record becomes one journal entry with ``MCPD_SERVER``, ``MCPD_EVENT``, ``MCPD_REASON``
and ``MCPD_STDERR`` next to ``MESSAGE`` and ``PRIORITY``, so that
``journalctl -u mcpd MCPD_EVENT=outage`` and ``journalctl -u mcpd MCPD_SERVER=tickets``
work. Elsewhere each record is one line on stderr.

The CLI calls ``setup_logging(args.log, args.log_level)`` once, before anything logs.
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
import stat
import sys
from collections.abc import Mapping
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
    ``fallback`` as a ``<N>``-prefixed line instead, so nothing is lost silently.

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
        identifier: str = IDENTIFIER,
        fallback: LineHandler | None = None,
        limiter: StderrRateLimiter | None = None,
    ) -> None:
        super().__init__(limiter)
        self.path = path
        self.identifier = identifier
        self.fallback = fallback or LineHandler(syslog_prefix=True)
        self.dropped = 0
        self._dropped_warnings = 0  # of ``dropped``: warnings or worse
        self._dropped_calls = 0  # of ``dropped``: calls' audit entries
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
            if not self._failed:
                self._failed = True
                self.fallback.write(
                    logging.makeLogRecord(
                        {
                            "levelno": logging.WARNING,
                            "levelname": "WARNING",
                            "msg": "journal socket %s unusable (%s); logging to stderr",
                            "args": (self.path, exc),
                        }
                    )
                )
            self.fallback.write(record)
            return
        self._failed = False

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
            self._send(encode_entry(self._dropped_fields()))
            self.dropped = self._dropped_warnings = self._dropped_calls = 0

    def _dropped_fields(self) -> list[tuple[str, str]]:
        kinds = [f"{self._dropped_warnings} warnings or worse"]
        if self._dropped_calls:
            kinds.append(f"{self._dropped_calls} call records, which the audit file keeps")
        notice = logging.makeLogRecord(
            {
                "levelno": logging.WARNING,
                "levelname": "WARNING",
                "msg": "%d log entries dropped: journald was not keeping up (%s)",
                "args": (self.dropped, "; ".join(kinds)),
                **log_extra(None, "dropped"),
            }
        )
        return [*record_fields(notice, self.identifier), ("MCPD_DROPPED", str(self.dropped))]

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


# --- mode selection ----------------------------------------------------------------------

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
LEVELS |= {"error": logging.ERROR, "critical": logging.CRITICAL}


def journal_stream_matches(environ: Mapping[str, str] | None = None, fd: int = 2) -> bool:
    """True when ``fd`` is the journal stream systemd connected (``$JOURNAL_STREAM`` is
    ``device:inode`` of it). A redirected stderr no longer matches, and then plain lines
    are what the reader expects."""
    env = os.environ if environ is None else environ
    try:
        dev, ino = (int(part) for part in env.get("JOURNAL_STREAM", "").split(":"))
        st = os.fstat(fd)
    except (ValueError, OSError):
        return False
    return (st.st_dev, st.st_ino) == (dev, ino)


def make_handler(
    mode: str,
    *,
    stream: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
    journal_socket: str = JOURNAL_SOCKET,
) -> logging.Handler:
    """The handler for ``--log auto|journal|stderr``."""
    if mode not in ("auto", "journal", "stderr"):
        raise ValueError(f"--log must be auto, journal or stderr, not {mode!r}")
    if mode == "stderr" or (mode == "auto" and not _stream_is_journal(environ, stream)):
        return LineHandler(stream)
    fallback = LineHandler(stream, syslog_prefix=True)
    if not _is_socket(journal_socket):
        return fallback
    return JournalHandler(journal_socket, fallback=fallback)


def _stream_is_journal(environ: Mapping[str, str] | None, stream: TextIO | None) -> bool:
    try:
        fd = 2 if stream is None else stream.fileno()
    except (OSError, ValueError):  # an in-memory stream has no fileno()
        return False
    return journal_stream_matches(environ, fd)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def setup_logging(
    mode: str = "auto",
    level: str = "info",
    *,
    stream: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
    journal_socket: str = JOURNAL_SOCKET,
) -> logging.Handler:
    """Install mcpd's handler on the root logger (replacing one installed before).

    ``mode``: ``auto`` (journald when stderr is systemd's journal stream, else lines),
    ``journal`` or ``stderr``. ``level``: debug, info, warning, error or critical.
    Raises ValueError on a bad mode or level.
    """
    try:
        levelno = LEVELS[level.lower()]
    except KeyError:
        raise ValueError(f"unknown log level {level!r}") from None
    handler = make_handler(mode, stream=stream, environ=environ, journal_socket=journal_socket)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, RateLimitedHandler)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(levelno)
    return handler
