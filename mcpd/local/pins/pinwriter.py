"""Writing ``pins.json`` anew without holding it in memory.

The new file is written a piece at a time as it is made (``state.privatefile`` takes the
pieces). A server whose pins did not change since the file was last written is copied
from the file being replaced, its bytes as they are; a server whose pins did has its
records made one by one, in the order the daemon keeps them (which is the file's: new
pins come last): a record that did not change is its line in the old file, read as
the old file is read, a line at a time; a new one is made from what it was pinned from
(``Unwritten``). Only when the old file is not as mcpd wrote it is a server's part of
it (or all of it) read whole and checked record by record.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from typing import BinaryIO, Final

import msgspec

from ...registry.pinning.definitions import (
    BARE,
    FORMAT,
    KINDS,
    BadPins,
    Kind,
    PinnedServer,
    PinSet,
    verified,
)
from ...registry.pinning.digests import ServerPins, Unwritten, definition_of, shown_digest
from ..state.privatefile import write_atomically
from .pinrecords import END_OF_SERVER, Sections, file_id, header, parsed, server_decoder

_FIELDS: Final[dict[Kind, bytes]] = {
    "tool": b"tools",
    "prompt": b"prompts",
    "template": b"templates",
    "instructions": b"instructions",
}
_KIND_LINES: Final = {b'      "%s": {' % field: kind for kind, field in _FIELDS.items()}
_RECORD: Final = b'        "'  # a record's line starts so, and has its name next
_DIGEST: Final = b': {"digest": "'
_REVIEWED: Final = b', "reviewed": true}'
_DEFINITION: Final = b'", "definition": '
_NO_DEFINITION: Final = _DEFINITION + BARE
_COPY: Final = 1 << 16  # bytes copied at a time


def write_pins(
    path: str, servers: dict[str, ServerPins], unwritten: Unwritten, sections: Sections | None
) -> Sections:
    """Write the pin file anew: each definition made from ``unwritten``, else taken
    from the file it replaces (``sections``: where each server's part is in it), if
    it is the one pinned; ``BadPins`` if it is in neither. Returns where each server's
    part is in the new file."""
    f, absent = _opened(path)
    try:
        old = _Old(path, f, sections, absent)
        spans: dict[str, tuple[int, int]] = {}
        written = write_atomically(path, _pieces(path, servers, unwritten, old, spans))
    finally:
        if f is not None:
            f.close()
    return Sections(file_id(written), spans)


def _opened(path: str) -> tuple[BinaryIO | None, str]:
    """The file being replaced, if there is one, else why not; not through a link (one
    at its name is replaced, as ``state.privatefile`` replaces it, and nothing is read from
    where it points)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None, "no file is there to take it from"
        if exc.errno == errno.ELOOP:
            return None, "a symbolic link is there now, and mcpd reads no pins through one"
        raise
    return os.fdopen(fd, "rb"), ""


class _Old:
    """The file being replaced."""

    def __init__(
        self, path: str, f: BinaryIO | None, sections: Sections | None, absent: str
    ) -> None:
        self.path = path
        self.f = f
        self.absent = absent  # why there is no file to read, where there is none
        if f is None or sections is None or file_id(os.fstat(f.fileno())) != sections.file:
            sections = None  # not the file they were found in
        self.sections = sections
        self._whole: PinSet | None = None

    def span(self, alias: str) -> tuple[int, int] | None:
        return None if self.sections is None else self.sections.spans.get(alias)

    def part(self, alias: str) -> Iterator[bytes] | None:
        """A server's part as it is, in pieces; None if it is not known where it is."""
        span = self.span(alias)
        if span is None or self.f is None:
            return None
        return _copied(self.f.fileno(), *span)

    def lines(self, alias: str) -> _Lines | None:
        span = self.span(alias)
        return None if span is None or self.f is None else _Lines(self.f, *span)

    def records(self, alias: str) -> PinnedServer | None:
        """A server's records, read whole."""
        if self.f is None:
            return None
        span = self.span(alias)
        if span is not None:
            part = os.pread(self.f.fileno(), span[1] - span[0], span[0])
            with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                return server_decoder.decode(part)
        if self._whole is None:
            size = os.fstat(self.f.fileno()).st_size
            self._whole = parsed(os.pread(self.f.fileno(), size, 0), self.path)
        return self._whole.servers.get(alias)


def _copied(fd: int, start: int, end: int) -> Iterator[bytes]:
    while start < end:
        chunk = os.pread(fd, min(_COPY, end - start), start)
        if not chunk:
            raise BadPins("the pin file being replaced got shorter")
        start += len(chunk)
        yield chunk


class _Lines:
    """One server's records in the old file, a line each, in the file's order."""

    def __init__(self, f: BinaryIO, start: int, end: int) -> None:
        f.seek(start)
        self._f = f
        self._end = end
        self._kind: Kind | None = None
        self._next: tuple[Kind, str, bytes] | None = None

    def _read(self) -> tuple[Kind, str, bytes] | None:
        while self._f.tell() < self._end:
            line = self._f.readline().rstrip(b"\n").rstrip(b",")
            kind = _KIND_LINES.get(line)
            if kind is not None:
                self._kind = kind
                continue
            if self._kind is None or not line.startswith(_RECORD):
                continue
            at = line.find(_DIGEST)
            if at < 0:
                return None
            name = msgspec.json.decode(line[len(_RECORD) - 1 : at])
            if not isinstance(name, str):
                return None
            return self._kind, name, line
        return None

    def find(self, kind: Kind, name: str, digest: bytes, reviewed: bool) -> bytes | None:
        """The line of this record, if it comes next of its kind (those before it are
        no longer pinned) and is as pinned: the same digest, reviewed alike."""
        while True:
            if self._next is None:
                self._next = self._read()
            if self._next is None:
                return None
            their_kind, their_name, line = self._next
            if KINDS.index(their_kind) > KINDS.index(kind):
                return None
            self._next = None
            if their_kind != kind or their_name != name:
                continue
            at = line.find(_DIGEST) + len(_DIGEST)
            if line[at : at + 71] != shown_digest(digest).encode():
                return None
            if not line.startswith(_DEFINITION, at + 71) or line.startswith(
                _NO_DEFINITION, at + 71
            ):
                return None  # kept by its digest alone: not the definition pinned
            return line if line.endswith(_REVIEWED) == reviewed else None


def _pieces(
    path: str,
    servers: dict[str, ServerPins],
    unwritten: Unwritten,
    old: _Old,
    spans: dict[str, tuple[int, int]],
) -> Iterator[bytes]:
    """The file, a piece at a time; ``spans`` gets where each server's part is."""
    opening = b'{\n  "format": %d,\n  "servers": {' % FORMAT
    yield opening
    at = len(opening)
    for n, (alias, server) in enumerate(servers.items()):
        head = b"%s%s" % (b"," if n else b"", header(alias))
        yield head
        at += len(head)
        begun = at
        part = None if alias in unwritten.servers else old.part(alias)
        for piece in part if part is not None else _server(path, alias, server, unwritten, old):
            yield piece
            at += len(piece)
        spans[alias] = (begun, at)
    yield b"\n  }\n}\n"


def _server(
    path: str, alias: str, server: ServerPins, unwritten: Unwritten, old: _Old
) -> Iterator[bytes]:
    """A server's part, made record by record."""
    yield b'{\n      "approved": %s' % (b"true" if server.approved else b"false")
    if server.forgotten:
        marks = {
            kind: server.forgotten[kind].encoded() for kind in KINDS if kind in server.forgotten
        }
        yield b',\n      "forgotten": %s' % msgspec.json.encode(marks)
    lines = old.lines(alias)
    records: PinnedServer | None = None
    for kind in KINDS:
        pinned = server.of(kind)
        if not pinned:
            continue
        yield b',\n      "%s": {' % _FIELDS[kind]
        for i, (name, digest) in enumerate(pinned.items()):
            reviewed = (kind, name) in server.reviewed
            comma = b"," if i else b""
            if (kind, name) in server.bare:
                yield _record(comma, name, digest, BARE, reviewed)
                continue
            source = unwritten.get(alias, kind, name)
            if source is None and lines is not None:
                line = lines.find(kind, name, digest, reviewed)
                if line is not None:
                    yield b"%s\n%s" % (comma, line)
                    continue
                lines = None  # not as it was written: read it whole from here on
            data = None if source is None else definition_of(source, digest)
            if data is None:
                if records is None:
                    records = old.records(alias)
                record = None if records is None else records.of(kind).get(name)
                found = None if record is None else verified(record, digest)
                if found is None:
                    why = f" ({old.absent})" if old.absent else ""
                    raise BadPins(f"{path}: the definition of {alias} {kind} {name!r} is lost{why}")
                data = bytes(found)
            yield _record(comma, name, digest, data, reviewed)
        yield b"\n      }"
    yield END_OF_SERVER


def _record(comma: bytes, name: str, digest: bytes, data: bytes, reviewed: bool) -> bytes:
    """One record's line (``data``: its definition, or ``BARE``)."""
    return b'%s\n        %s: {"digest": "%s", "definition": %s%s}' % (
        comma,
        msgspec.json.encode(name),
        shown_digest(digest).encode(),
        data,
        _REVIEWED[:-1] if reviewed else b"",
    )
