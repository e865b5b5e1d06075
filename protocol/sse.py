"""A ``text/event-stream`` decoder: bytes in, events out, no I/O.

It follows the WHATWG event-stream parsing rules (CRLF, LF or CR line endings, ``:``
comments, one optional space after the colon, ``data`` lines joined with ``\\n``, a
leading BOM skipped) with two deliberate choices for a client that only ever reads
JSON-RPC from the stream:

* ``data`` stays bytes, so a JSON decoder can take it without a round trip through
  ``str``; the other fields are decoded as UTF-8.
* ``flush()`` at the end of the stream dispatches an event whose blank line never
  came, instead of dropping it: some servers close right after the last ``data``
  line, and the message in it is still the answer the client is waiting for. If the
  stream was cut inside that message, the JSON decoder will say so.

An event (plus the line being read) may not grow past ``max_event`` bytes: the
decoder raises ``SSEError`` as soon as it does, so a peer that never ends an event
costs at most that much memory.

``resume_id`` is what a client sends as ``Last-Event-ID`` when it reconnects: the
stream's last event id as of the last event that was complete (a blank line ended
it, or the stream ended cleanly after it), whether or not that event carried data.
``ResumePoint`` keeps it across the streams one exchange is resumed on, with the
wait before the next one.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

from protocol.headers import is_plain

DEFAULT_MAX_EVENT: Final = 16 * 1024 * 1024
# Without a ``retry:`` from the server, the first wait before reconnecting.
DEFAULT_RETRY: Final = 1.0
# A ``retry:`` longer than this many digits is ignored: it names no usable wait (more
# than 31 years), and a number of thousands of digits is costly to convert.
_RETRY_DIGITS: Final = 12
_EOL: Final = re.compile(rb"\r\n|\r|\n")
_BOM: Final = b"\xef\xbb\xbf"


class SSEError(Exception):
    """The stream cannot be decoded any further (an event over the size limit)."""


class EventTooLarge(SSEError):
    """One event grew past ``max_event``; the stream cannot be read further."""


class SSEEvent(msgspec.Struct, frozen=True):
    """One dispatched event.

    ``event`` is ``"message"`` when the stream named no type. ``id`` is the stream's
    last event id at dispatch time (ids are sticky, as in browsers), ``retry`` the
    reconnection time given inside this event, if any.
    """

    data: bytes
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    __slots__ = (
        "_after_cr",
        "_data_size",
        "_event",
        "_failed",
        "_first",
        "_has_data",
        "_line",
        "_more",
        "_retry",
        "_started",
        "last_event_id",
        "max_event",
        "resume_id",
        "retry",
    )

    def __init__(self, max_event: int = DEFAULT_MAX_EVENT) -> None:
        self.max_event = max_event
        self.last_event_id: str | None = None
        self.resume_id: str | None = None
        self.retry: int | None = None
        self._line = bytearray()
        # An event's data: its one line as it came (most events have one), or its lines
        # joined as they come, so that memory follows the bytes however many lines.
        self._first = b""
        self._more = bytearray()
        self._data_size = 0
        self._has_data = False
        self._event = ""
        self._retry: int | None = None
        # A CR ended the previous chunk: an LF opening the next one belongs to it.
        self._after_cr = False
        self._started = False
        self._failed = False

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
                self._line += data[pos:]
                self._check_size()
                break
            if self._line:
                self._line += data[pos:stop]
                line = bytes(self._line)
                self._line.clear()
            else:
                line = data[pos:stop]
            if after == end and data[end - 1] == 0x0D:
                self._after_cr = True
            pos = after
            self._process(line, out)
        return out

    def flush(self) -> list[SSEEvent]:
        """At end of stream: the last event, if the stream stopped before its blank line."""
        out: list[SSEEvent] = []
        if self._failed:
            return out
        if self._line:
            line = bytes(self._line)
            self._line.clear()
            self._process(line, out)
        self._dispatch(out)
        self._after_cr = False
        return out

    def _strip_bom(self, data: bytes) -> bytes:
        if not self._line and len(data) >= 3:
            self._started = True  # decided by the first feed, as it nearly always is
            return data[3:] if data.startswith(_BOM) else data
        # The BOM may itself arrive split across feeds; hold bytes back until it is decided.
        self._line += data
        head = bytes(self._line[:3])
        if len(head) < 3 and _BOM.startswith(head):
            return b""
        self._started = True
        buffered = bytes(self._line)
        self._line.clear()
        return buffered[3:] if head == _BOM else buffered

    def _process(self, line: bytes, out: list[SSEEvent]) -> None:
        if not line:
            self._dispatch(out)
            return
        if line[0] == 0x3A:  # ":" comment, a keep-alive
            return
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name = line[:colon]
            # One slice of the value: a data line may be a whole large message.
            start = colon + 2 if line[colon + 1 : colon + 2] == b" " else colon + 1
            value = line[start:]
        if name == b"data":
            if not self._has_data:
                self._first = value
                self._has_data = True
            else:
                if not self._more:
                    self._more += self._first
                    self._first = b""
                self._more += b"\n"
                self._more += value
            self._data_size += len(value) + 1
            self._check_size()
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id" and b"\0" not in value:
            self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit() and len(value) <= _RETRY_DIGITS:
            self._retry = self.retry = int(value)
        # Unknown field names are ignored, as the format requires.

    def _dispatch(self, out: list[SSEEvent]) -> None:
        # A priming event (an id and no data) counts too: it is where a resumed
        # stream picks up.
        self.resume_id = self.last_event_id
        if self._has_data:
            data = bytes(self._more) if self._more else self._first
            out.append(
                SSEEvent(
                    data=data,
                    event=self._event or "message",
                    id=self.last_event_id,
                    retry=self._retry,
                )
            )
            self._first = b""
            if self._more:
                self._more = bytearray()
        self._data_size = 0
        self._has_data = False
        self._event = ""
        self._retry = None

    def _check_size(self) -> None:
        if self._data_size + len(self._line) > self.max_event:
            self._failed = True
            self._line.clear()
            self._first = b""
            self._more = bytearray()
            raise EventTooLarge(f"event stream event larger than {self.max_event} bytes")


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
