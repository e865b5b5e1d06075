"""Which of ``journal``'s handlers mcpd logs through: ``--log auto|journal|stderr``.

The CLI calls ``setup_logging(args.log, args.log_level)`` once, before anything logs.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from typing import TextIO

from .journal import JOURNAL_SOCKET, JournalHandler, LineHandler, RateLimitedHandler

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
    fallback = LineHandler(stream, syslog_prefix=True)
    if mode == "auto" and _unheard_service(environ, stream):
        # journald was down as systemd started us, and gave us no stream: its native
        # socket takes the entries once it is back, and until then they go where
        # stderr goes, which is nowhere, as plain lines would.
        return JournalHandler(journal_socket, fallback=fallback)
    if mode == "stderr" or (mode == "auto" and not _stream_is_journal(environ, stream)):
        return LineHandler(stream)
    if not _is_socket(journal_socket):
        return fallback
    return JournalHandler(journal_socket, fallback=fallback)


def _fd_of(stream: TextIO | None) -> int | None:
    try:
        return 2 if stream is None else stream.fileno()
    except (OSError, ValueError):  # an in-memory stream has no fileno()
        return None


def _stream_is_journal(environ: Mapping[str, str] | None, stream: TextIO | None) -> bool:
    fd = _fd_of(stream)
    return fd is not None and journal_stream_matches(environ, fd)


def _unheard_service(environ: Mapping[str, str] | None, stream: TextIO | None) -> bool:
    """A service systemd started (it sets ``$INVOCATION_ID`` for each) whose stderr
    goes nowhere (``/dev/null``, or closed): what systemd gives a service whose journal
    stream it could not connect. Nobody reads that stderr; a terminal or a file would
    be read, and is left to lines."""
    env = os.environ if environ is None else environ
    if not env.get("INVOCATION_ID"):
        return False
    fd = _fd_of(stream)
    if fd is None:
        return False
    try:
        st = os.fstat(fd)
    except OSError:
        return True  # closed
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev


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
    journal_socket: str = JOURNAL_SOCKET,
) -> logging.Handler:
    """Install mcpd's handler on the root logger (replacing one installed before).

    ``mode``: ``auto`` (journald when stderr is systemd's journal stream, or when a
    service's stderr goes nowhere; else lines), ``journal`` or ``stderr``. ``level``:
    debug, info, warning, error or critical. Raises ValueError on a bad mode or level.
    """
    try:
        levelno = LEVELS[level.lower()]
    except KeyError:
        raise ValueError(f"unknown log level {level!r}") from None
    handler = make_handler(mode, stream=stream, journal_socket=journal_socket)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, RateLimitedHandler)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(levelno)
    return handler
