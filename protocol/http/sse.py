"""A ``text/event-stream`` decoder: bytes in, events out, no I/O.

It follows the WHATWG event-stream parsing rules (CRLF, LF or CR line endings, ``:``
comments, one optional space after the colon, ``data`` lines joined with ``\\n``, a
leading BOM skipped, an event the stream ends inside dropped). One choice is its own,
for a client that only ever reads JSON-RPC from the stream: ``data`` stays bytes, so
a JSON decoder can take it without a round trip through ``str``; the other fields
are decoded as UTF-8.

An event (plus the line being read) may not grow past ``max_event`` bytes (else
``SSEError``): a peer that never ends an event costs at most that much memory. An
event's data is written where it will be, held once however many pieces it came in.
``held`` says how much of an event not yet complete the decoder holds; ``line_cost``
what reading lines cost as they came (``protocol.pacing.read_budget``'s units): a
unit a line, and one each ``UNIT_BYTES`` of a line that carried no data. An event's
``data`` lines are free as they come up to one each ``FREE_LINE_BYTES`` it may hold
(an honest answer of many lines is not held back by its own lines), then a unit each
(an event that never ends). ``data_cost`` is what the complete event adds: the rest
of ``cost`` of its data, or, for an answer, what its lines were charged given back.
An event cut for its size is charged its lines, not yet charged, and not its bytes.

``resume_id`` is what a client sends as ``Last-Event-ID`` when it reconnects: the
stream's last event id as of the last event that was complete (a blank line ended it),
data or not. ``ResumePoint`` keeps it across the streams one exchange is resumed on,
with the wait before the next one.
"""

from __future__ import annotations

import io
import re
from typing import Final

import msgspec

from protocol.http.mcp_headers import is_plain
from protocol.pacing.read_budget import UNIT_BYTES, cost

DEFAULT_MAX_EVENT: Final = 16 * 1024 * 1024
# Without a ``retry:`` from the server, the first wait before reconnecting.
DEFAULT_RETRY: Final = 1.0
# A ``retry:`` longer than this many digits is ignored: it names no usable wait (more
# than 31 years), and a number of thousands of digits is costly to convert.
_RETRY_DIGITS: Final = 12
_EOL: Final = re.compile(rb"\r\n|\r|\n")
_BOM: Final = b"\xef\xbb\xbf"
# The fields read besides ``data``; what a line begun in an earlier feed is known to be.
_FIELDS: Final = frozenset({b"event", b"id", b"retry"})
_LONGEST_NAME: Final = 5
# An event's data lines are free as they come up to one each this many bytes it may
# hold: a pretty-printed answer has longer lines on average.
FREE_LINE_BYTES: Final = 16
_HEAD, _DATA, _VALUE, _SKIP = range(4)


class SSEError(Exception):
    """The stream cannot be decoded any further (an event over the size limit)."""


class EventTooLarge(SSEError):
    """One event grew past ``max_event``; the stream cannot be read further."""


class SSEEvent(msgspec.Struct, frozen=True):
    """One dispatched event. ``event`` is ``"message"`` when the stream named no type,
    ``id`` the stream's last event id at dispatch time (sticky, as in browsers), ``retry``
    the reconnection time given inside this event, if any."""

    data: bytes
    event: str = "message"
    id: str | None = None
    retry: int | None = None
    # What its data lines were charged as they came (``line_cost``).
    charged: int = 0


class SSEDecoder:
    __slots__ = (
        "_after_cr",
        "_buffer",
        "_data_size",
        "_event",
        "_failed",
        "_first",
        "_has_data",
        "_head",
        "_kind",
        "_line_size",
        "_lines",
        "_name",
        "_partial",
        "_retry",
        "_space",
        "_started",
        "last_event_id",
        "line_cost",
        "max_event",
        "resume_id",
        "retry",
    )

    def __init__(self, max_event: int = DEFAULT_MAX_EVENT) -> None:
        self.max_event = max_event
        self.last_event_id: str | None = None
        self.resume_id: str | None = None
        self.retry: int | None = None
        # What reading lines cost as they came: besides the events' data (``data_cost``).
        self.line_cost = 0.0
        # An event's data: its one line as it came (most events have one), or a buffer
        # once it has more lines or a line came in pieces, which becomes its data.
        self._first = b""
        self._buffer: io.BytesIO | None = None
        self._has_data = False
        self._data_size = 0
        self._lines = 0
        self._event = ""
        self._retry: int | None = None
        # A line begun in an earlier feed: what it is (``_kind``), its size; until its
        # colon came, its first bytes; for another field than ``data``, its value.
        self._partial = False
        self._kind = _HEAD
        self._head = bytearray()
        self._name = b""
        self._line_size = 0
        # The colon was the last byte of the line so far: a space after it is not data.
        self._space = False
        # A CR ended the previous chunk: an LF opening the next one belongs to it.
        self._after_cr = False
        self._started = False
        self._failed = False

    @property
    def held(self) -> int:
        """Bytes of the event not yet complete (its data and the line being read)."""
        return self._data_size + self._line_size

    def feed(self, data: bytes) -> list[SSEEvent]:
        if self._failed:
            raise SSEError("event stream decoder already failed")
        out: list[SSEEvent] = []
        if not self._started:
            data = self._strip_bom(data)
            if not self._started:
                return out
        pos = 0
        end = len(data)
        if self._after_cr and end:
            self._after_cr = False
            if data[0] == 0x0A:
                pos = 1
        # Lines end in LF alone in most streams: found with find(), not the pattern.
        lf_only = b"\r" not in data
        while pos < end:
            if lf_only:
                stop = data.find(b"\n", pos)
                after = stop + 1
            else:
                m = _EOL.search(data, pos)
                stop, after = (-1, -1) if m is None else (m.start(), m.end())
            if stop < 0:
                self._extend(data, pos, end)
                self._check_size()
                break
            if self._partial:
                self._extend(data, pos, stop)
                self._end_line(out)
            else:
                self._line(data, pos, stop, out)
            if after == end and data[end - 1] == 0x0D:
                self._after_cr = True
            pos = after
        return out

    def flush(self) -> list[SSEEvent]:
        """At end of stream: nothing more. An event the stream ended inside is dropped,
        as the format requires: it may be a message cut short that only looks whole."""
        self._partial = False
        self._kind = _HEAD
        self._line_size = 0
        self._space = False
        self._head.clear()
        self._first = b""
        self._buffer = None
        self._data_size = 0
        self._lines = 0
        self._has_data = False
        self._event = ""
        self._retry = None
        self._after_cr = False
        self.last_event_id = self.resume_id
        return []

    def _strip_bom(self, data: bytes) -> bytes:
        if not self._head and len(data) >= 3:
            self._started = True  # decided by the first feed, as it nearly always is
            return data[3:] if data.startswith(_BOM) else data
        # The BOM may itself arrive split across feeds; hold bytes back until it is decided.
        self._head += data
        head = bytes(self._head[:3])
        if len(head) < 3 and _BOM.startswith(head):
            return b""
        self._started = True
        buffered = bytes(self._head)
        self._head.clear()
        return buffered[3:] if head == _BOM else buffered

    def _line(self, data: bytes, pos: int, stop: int, out: list[SSEEvent]) -> None:
        """A line that came whole: ``data[pos:stop]``."""
        if pos == stop:
            self.line_cost += 1.0
            self._dispatch(out)
            return
        if data[pos] == 0x3A:  # ":" comment, a keep-alive
            self.line_cost += 1.0 + (stop - pos) / UNIT_BYTES
            return
        colon = data.find(b":", pos, stop)
        if colon < 0:
            name, start = data[pos:stop], stop
        else:
            name = data[pos:colon]
            start = colon + 2 if data[colon + 1 : colon + 2] == b" " else colon + 1
        # One slice of the value: a data line may be a whole large message.
        if name == b"data":
            self._data_line()
            value = data[start:stop]
            if not self._has_data:
                self._first = value
                self._has_data = True
                self._data_size = len(value) + 1
            else:
                buffer = self._data_buffer()
                buffer.write(b"\n")
                buffer.write(value)
                self._data_size = buffer.tell() + 1
            self._check_size()
            return
        self.line_cost += 1.0 + (stop - pos) / UNIT_BYTES
        if name in _FIELDS:
            self._field(name, data[start:stop])
        # Unknown field names are ignored, as the format requires.

    def _extend(self, data: bytes, pos: int, stop: int) -> None:
        """``data[pos:stop]`` is more of a line that has not ended yet."""
        if not self._partial:
            self._partial = True
            self._kind = _HEAD
        self._line_size += stop - pos
        if self._kind == _HEAD:
            pos = self._read_name(data, pos, stop)
        if self._space and pos < stop:
            self._space = False
            if data[pos] == 0x20:
                pos += 1
        kind = self._kind
        if kind == _DATA:
            assert self._buffer is not None
            self._buffer.write(memoryview(data)[pos:stop])
        elif kind == _VALUE:
            self._head += memoryview(data)[pos:stop]

    def _read_name(self, data: bytes, pos: int, stop: int) -> int:
        """Where the value begins in ``data[pos:stop]``, once the colon that ends the
        line's field name came; until then its bytes are kept (or skipped, once they
        are longer than any name of a field read here)."""
        colon = data.find(b":", pos, stop)
        if colon < 0:
            self._head += memoryview(data)[pos:stop]
            if len(self._head) > _LONGEST_NAME:
                self._kind = _SKIP
                self._head.clear()
            return stop
        self._head += memoryview(data)[pos:colon]
        name = bytes(self._head)
        self._head.clear()
        self._space = True
        if name == b"data":
            self._kind = _DATA
            buffer = self._data_buffer()
            if self._has_data:
                buffer.write(b"\n")
            self._has_data = True
        elif name in _FIELDS:
            self._kind = _VALUE
            self._name = name
        else:
            self._kind = _SKIP  # a comment (no name), or a field not read here
        return colon + 1

    def _end_line(self, out: list[SSEEvent]) -> None:
        """The line begun in an earlier feed has ended."""
        kind, size = self._kind, self._line_size
        self._partial = False
        self._line_size = 0
        self._space = False
        if kind == _HEAD:
            line = bytes(self._head)  # a name without a colon: "data" is a field
            self._head.clear()
            self._line(line, 0, len(line), out)
        elif kind == _DATA:
            assert self._buffer is not None
            self._data_line()
            self._data_size = self._buffer.tell() + 1
            self._check_size()
        else:
            self.line_cost += 1.0 + size / UNIT_BYTES
            if kind == _VALUE:
                value = bytes(self._head)
                self._head.clear()
                self._field(self._name, value)

    def _data_line(self) -> None:
        self._lines += 1
        if self._lines > self.max_event // FREE_LINE_BYTES:
            self.line_cost += 1.0

    def _field(self, name: bytes, value: bytes) -> None:
        if name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        elif value.isdigit() and len(value) <= _RETRY_DIGITS:
            self._retry = self.retry = int(value)

    def _data_buffer(self) -> io.BytesIO:
        if self._buffer is None:
            self._buffer = io.BytesIO()
            if self._has_data:
                self._buffer.write(self._first)
                self._first = b""
        return self._buffer

    def _dispatch(self, out: list[SSEEvent]) -> None:
        # A priming event (an id and no data) counts too: a resumed stream picks up there.
        self.resume_id = self.last_event_id
        if self._has_data:
            data = self._first
            if self._buffer is not None:
                data = self._buffer.getvalue()  # the buffer's own bytes: no copy
                self._buffer = None
            out.append(
                SSEEvent(
                    data=data,
                    event=self._event or "message",
                    id=self.last_event_id,
                    retry=self._retry,
                    charged=self._charged(),
                )
            )
            self._first = b""
        self._data_size = 0
        self._lines = 0
        self._has_data = False
        self._event = ""
        self._retry = None

    def _check_size(self) -> None:
        if self._data_size + self._line_size > self.max_event:
            # Its lines not charged yet, the one it was in: not its bytes, so that one
            # honest result too large to pass on does not hold back the next ones.
            self.line_cost += self._lines - self._charged() + 1
            self._failed = True
            self._head.clear()
            self._first = b""
            self._buffer = None
            raise EventTooLarge(f"event stream event larger than {self.max_event} bytes")

    def _charged(self) -> int:
        return max(self._lines - self.max_event // FREE_LINE_BYTES, 0)


def data_cost(event: SSEEvent, answered: bool) -> float:
    """What a complete event's data adds to what its lines were charged as they came:
    the rest of ``cost`` of it; for an answer, what they were charged given back."""
    return -float(event.charged) if answered else cost(event.data) - event.charged


class ResumePoint:
    """Where one exchange's event streams got to, across its resumptions."""

    __slots__ = ("event_id", "retry_ms")

    def __init__(self) -> None:
        self.event_id: str | None = None
        self.retry_ms: int | None = None

    def update(self, decoder: SSEDecoder) -> None:
        """Take where a stream that ended got to; an id a header cannot carry is not
        taken, and a resumed stream that brought no id of its own resumes from the
        same place."""
        rid = decoder.resume_id
        if rid and is_plain(rid):
            self.event_id = rid
        if decoder.retry is not None:
            self.retry_ms = decoder.retry

    @property
    def delay(self) -> float:
        """Seconds to wait before the next stream: the server's ``retry``, or a second."""
        return DEFAULT_RETRY if self.retry_ms is None else self.retry_ms / 1000
