"""Newline framing for stdio and the agent socket: bytes in, complete lines out.

A line longer than the limit is reported once, as soon as the limit is passed, and the
rest of it is discarded as it arrives, so a peer that never sends a newline costs at
most ``max_line`` bytes of memory. What is discarded was read all the same: ``skipped``
counts its bytes until they are taken (``take_skipped``), for a reader that charges
what reading cost. So with blank lines (empty, or of spaces alone), which are dropped
rather than handed on: ``blank`` counts them, and their bytes, until they are taken
(``take_blank``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

DEFAULT_MAX_LINE: Final = 16 * 1024 * 1024
_PREFIX_KEEP: Final = 512
# A chunk whose first line is shorter than this is cut with bytes.split, the quickest
# way for short lines; one of long lines with find (memchr), as split walks a long line
# byte by byte (a 16 KiB line costs it several times what find does).
_SHORT_LINE: Final = 2048
BOM: Final = b"\xef\xbb\xbf"


def without_bom(line: bytes) -> bytes:
    """``line`` without a UTF-8 byte order mark in front.

    Tools built on Windows (.NET, PowerShell) often start their output with one; JSON
    does not allow it, and the line it sits on is usually the first answer a server
    gives. One at the start of a later line does no harm either, so every line may go
    through this."""
    return line[3:] if line.startswith(BOM) else line


class Oversized:
    """A line that passed the limit. ``prefix`` is its start, for diagnostics."""

    __slots__ = ("limit", "prefix")

    def __init__(self, prefix: bytes, limit: int) -> None:
        self.prefix = prefix
        self.limit = limit

    def __repr__(self) -> str:
        return f"Oversized(limit={self.limit}, prefix={self.prefix[:40]!r})"


class OversizedEnd(Oversized):
    """The end of a line reported as ``Oversized``: its last bytes and its whole size
    (only from a framer made with ``report_end``). A response's id may be at its end."""

    __slots__ = ("size", "tail")

    def __init__(self, tail: bytes, size: int, limit: int) -> None:
        super().__init__(b"", limit)
        self.tail = tail
        self.size = size

    def __repr__(self) -> str:
        return f"OversizedEnd(size={self.size}, tail={self.tail[-40:]!r})"


class LineFramer:
    __slots__ = (
        "_buf",
        "_discarded",
        "_discarding",
        "_report_end",
        "_tail",
        "blank",
        "blank_bytes",
        "max_line",
        "skipped",
    )

    def __init__(self, max_line: int = DEFAULT_MAX_LINE, *, report_end: bool = False) -> None:
        self.max_line = max_line
        self._buf = bytearray()
        self._discarding = False
        self._report_end = report_end
        self._tail = b""  # the last bytes of the line being discarded
        self._discarded = 0
        # Bytes of lines over the limit discarded since they were last taken.
        self.skipped = 0
        # Blank lines dropped since they were last taken, and their bytes.
        self.blank = 0
        self.blank_bytes = 0

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray) -> Sequence[bytes | Oversized]:
        if (
            len(data) <= self.max_line
            and not self._buf
            and not self._discarding
            and data.find(b"\n", 0, _SHORT_LINE) >= 0
        ):
            # The usual chunk: whole short lines of JSON objects, none over the limit.
            lines = (data if type(data) is bytes else bytes(data)).split(b"\n")
            tail = lines.pop()
            if tail:
                self._buf += tail
            if b"\r" in data:
                return self._tidy(lines)
            for line in lines:
                if line[:1] != b"{":
                    return self._tidy(lines)
            return lines
        out: list[bytes | Oversized] = []
        start = 0
        if self._discarding:
            nl = data.find(b"\n")
            if nl < 0:
                self._skip(data, len(data))
                return out
            self._discarding = False
            self._skip(data, nl)
            if self._report_end:
                out.append(OversizedEnd(self._tail.rstrip(b"\r"), self._discarded, self.max_line))
            start = nl + 1
        elif self._buf:
            nl = data.find(b"\n")
            if nl < 0:
                self._buf += data
                if len(self._buf) > self.max_line:
                    out.append(self._overflow(self._buf))
                return out
            self._buf += data[:nl]
            self._emit(bytes(self._buf), out)
            self._buf.clear()
            start = nl + 1
        find, limit = data.find, self.max_line
        while True:
            nl = find(b"\n", start)
            if nl < 0:
                break
            if nl > start:
                line = bytes(data[start:nl])
                if line[:1] == b"{" and line[-1:] != b"\r" and len(line) <= limit:
                    out.append(line)  # what _emit would do with it, without the call
                else:
                    self._emit(line, out)
            else:
                self.blank += 1
            start = nl + 1
        if start < len(data):
            rest = data[start:]
            if len(rest) > self.max_line:
                out.append(self._overflow(rest))
            else:
                self._buf += rest
        return out

    def take_skipped(self) -> int:
        """Bytes of lines over the limit discarded since the last call."""
        skipped, self.skipped = self.skipped, 0
        return skipped

    def take_blank(self) -> tuple[int, int]:
        """Blank lines dropped since the last call, and their bytes (without newlines)."""
        taken = self.blank, self.blank_bytes
        self.blank = self.blank_bytes = 0
        return taken

    def _tidy(self, lines: list[bytes]) -> list[bytes | Oversized]:
        """``lines`` (of a short chunk) as ``_emit`` puts them out."""
        out: list[bytes | Oversized] = []
        for line in lines:
            self._emit(line, out)
        return out

    def flush(self) -> list[bytes | Oversized]:
        """At end of stream: the last line, if it had no newline."""
        out: list[bytes | Oversized] = []
        if self._buf and not self._discarding:
            self._emit(bytes(self._buf), out)
        self._buf.clear()
        self._discarding = False
        return out

    def _emit(self, line: bytes, out: list[bytes | Oversized]) -> None:
        # Measured with its CR, as a line still being buffered is: otherwise a line of
        # max_line bytes plus CR passed in one read and was Oversized when split.
        if len(line) > self.max_line:
            self.skipped += len(line)
            out.append(Oversized(line[:_PREFIX_KEEP], self.max_line))
            if self._report_end:
                out.append(
                    OversizedEnd(line[-_PREFIX_KEEP:].rstrip(b"\r"), len(line), self.max_line)
                )
            return
        size = len(line)
        if line.endswith(b"\r"):
            line = line[:-1]
        if line and not line.isspace():
            out.append(line)
        else:
            self.blank += 1
            self.blank_bytes += size

    def _overflow(self, data: bytes | bytearray) -> Oversized:
        prefix = bytes(data[:_PREFIX_KEEP])
        self._tail = b""
        self._discarded = 0
        self._skip(data, len(data))
        self._buf.clear()
        self._discarding = True
        return Oversized(prefix, self.max_line)

    def _skip(self, data: bytes | bytearray, end: int) -> None:
        """``data[:end]`` is more of the line being discarded."""
        self._discarded += end
        self.skipped += end
        if self._report_end:
            kept = bytes(data[max(end - _PREFIX_KEEP, 0) : end])
            self._tail = (self._tail + kept)[-_PREFIX_KEEP:]
