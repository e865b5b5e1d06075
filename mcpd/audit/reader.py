"""Reading the audit log back, oldest record first, and choosing records: what ``mcpd
calls`` does. It reads the files directly, so the daemon need not be running.

A file under one of the log's names that is not as mcpd writes them (a FIFO, which
would hold the reader forever, a file of another user's, with records they chose, one
others may write) is not read, and is named in ``refused``; the others are."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from typing import BinaryIO, Final

import msgspec
from msgspec import UnsetType

from ..config.tables.glob import Glob
from ..local.state.privatefile import UnsafeFileError, open_private
from .logfile import FILE_NAME
from .record import CallRecord, Gap

_ROTATED: Final = re.compile(re.escape(FILE_NAME) + r"\.([0-9]{1,4})\Z")
# A line longer than any record the daemon writes is garbage (another process's, or a
# crash's run of zeros): it is passed over, never held whole.
MAX_LINE: Final = 64 * 1024 * 1024
_records: Final = msgspec.json.Decoder(CallRecord)
_gaps: Final = msgspec.json.Decoder(Gap)


def log_files(directory: str) -> list[str]:
    """The audit files in ``directory``, oldest first (``calls.jsonl.N`` … ``.1``,
    then ``calls.jsonl``)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    rotated = sorted(
        ((int(m.group(1)), name) for name in names if (m := _ROTATED.match(name))),
        reverse=True,
    )
    found = [os.path.join(directory, name) for _, name in rotated]
    if FILE_NAME in names:
        found.append(os.path.join(directory, FILE_NAME))
    return found


class AuditRecords:
    """The records of a directory's audit files, and what could not be read."""

    def __init__(self, directory: str, max_line: int = MAX_LINE) -> None:
        self.files = log_files(directory)
        self.max_line = max_line
        self.unreadable = 0  # lines that are no record (one cut short by a crash)
        self.dropped = 0  # records the daemon counted but could not write
        # Calls whose records the file could not take, and when the first and the last
        # of them came.
        self.lost = 0
        self.lost_from = math.inf
        self.lost_until = -math.inf
        self.refused: list[str] = []  # why a file was not read

    def __iter__(self) -> Iterator[CallRecord]:
        for path in self.files:
            try:
                fd, _ = open_private(path, os.O_RDONLY, "not read")
            except FileNotFoundError:
                continue  # rotated away while we read
            except UnsafeFileError as exc:
                self.refused.append(str(exc))
                continue
            with os.fdopen(fd, "rb") as f:
                for line in _lines(f, self.max_line):
                    if line is None:
                        self.unreadable += 1
                        continue
                    record = self._decode(line)
                    if record is not None:
                        yield record

    def _decode(self, line: bytes) -> CallRecord | None:
        if not line.strip():
            return None
        try:
            return _records.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass
        try:
            gap = _gaps.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.unreadable += 1
            return None
        self.dropped += gap.dropped
        if not isinstance(gap.lost, UnsetType):
            self.lost += gap.lost
            first = gap.ts if isinstance(gap.first_ts, UnsetType) else gap.first_ts
            last = gap.ts if isinstance(gap.last_ts, UnsetType) else gap.last_ts
            self.lost_from = min(self.lost_from, first)
            self.lost_until = max(self.lost_until, last)
        return None


def _lines(f: BinaryIO, limit: int) -> Iterator[bytes | None]:
    """The lines of ``f``, and None for each longer than ``limit`` bytes (its line
    feed aside), which is read past in pieces of that size."""
    while line := f.readline(limit + 1):
        if len(line) <= limit or line.endswith(b"\n"):
            yield line
            continue
        while (rest := f.readline(limit)) and not rest.endswith(b"\n"):
            pass
        yield None


class Choice(msgspec.Struct, frozen=True, kw_only=True):
    """Which records to show; what is left out (None, False) does not choose."""

    since: float | None = None  # Unix time
    server: str | None = None  # a glob over aliases
    tool: str | None = None  # a glob over the agent's name or ``ALIAS/NAME``
    agent: int | None = None  # a pid or a uid
    uid: int | None = None  # a user's (named): never a pid of that number
    failed: bool = False

    def compiled(self) -> _Compiled:
        return _Compiled(self)


class _Compiled:
    def __init__(self, choice: Choice) -> None:
        self.choice = choice
        self.server = Glob(choice.server) if choice.server is not None else None
        self.tool = Glob(choice.tool) if choice.tool is not None else None

    def admits(self, r: CallRecord) -> bool:
        c = self.choice
        if c.since is not None and r.ts < c.since:
            last = r.last_ts  # a summary's, of requests up to then
            if isinstance(last, UnsetType) or last < c.since:
                return False
        if self.server is not None and not self.server.match(r.server or ""):
            return False
        if self.tool is not None:
            qualified = f"{r.server}/{r.original}" if r.server and r.original else ""
            if not (self.tool.match(r.name or "") or self.tool.match(qualified)):
                return False
        if c.agent is not None and c.agent not in (r.agent.pid, r.agent.uid):
            return False
        if c.uid is not None and c.uid != r.agent.uid:
            return False
        return not c.failed or r.failed
