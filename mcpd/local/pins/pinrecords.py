"""``pins.json`` as records: read back whole, or one server's part of it (``pinwriter``
writes it).

mcpd writes the file as one JSON document laid out so that each server's part starts
on a line of its own and each pinned item is one line: its digest, its definition in
canonical form, and whether a person approved it. Reading a record back then only
hashes its definition. Where each server's part lies is noted as the file is written
(or found as it is read), so that the approved definition of a held item is read
from its server's part alone; the note holds only for the file it was made of (its
inode, size and time), and anything that does not read as expected is read whole.

A file in another layout (indented, its keys in another order) reads the same: only
a server part that does not start and end as mcpd writes one is not found, and is
read with the rest of the file; a rewrite lays out anew each server it writes.
"""

from __future__ import annotations

import contextlib
import os
from typing import Final

import msgspec

from ...registry.pinning.definitions import (
    FORMAT,
    FORMATS,
    KINDS,
    BadPins,
    PinnedServer,
    PinSet,
    bare,
    checked,
    verified,
)
from ...registry.pinning.digests import FoundDefinitions, Pins, ServerPins, Wanted, parsed_digest
from ...registry.pinning.forgotten import decoded
from ..state.privatefile import read_private

_decoder: Final = msgspec.json.Decoder(PinSet)
server_decoder: Final = msgspec.json.Decoder(PinnedServer)
END_OF_SERVER: Final = b"\n    }"
_END_OF_FILE: Final = b"\n  }\n}"

FileId = tuple[int, int, int]  # inode, size, modification time (ns)


class Sections:
    """Where each server's part is in one version of the file: byte spans, by alias."""

    __slots__ = ("file", "spans")

    def __init__(self, file: FileId, spans: dict[str, tuple[int, int]]) -> None:
        self.file = file
        self.spans = spans


def file_id(st: os.stat_result) -> FileId:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def header(alias: str) -> bytes:
    return b"\n    " + msgspec.json.encode(alias) + b": "


def read_pin_file(path: str) -> tuple[bytes, FileId] | None:
    """The file's bytes, and which file they were read from: only a file of mcpd's user,
    root or the service user that nobody else can write (``UnsafeFileError`` otherwise)."""
    found = read_private(path, "mcpd writes its own in its place")
    return None if found is None else (found[0], file_id(found[1]))


def parsed(data: bytes, source: str) -> PinSet:
    """A pin file as it is, not checked."""
    try:
        pins = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadPins(f"{source}: not a pin file: {exc}") from None
    if pins.format not in FORMATS:
        raise BadPins(f"{source}: pin format {pins.format}, expected {FORMAT}")
    return pins


def decode(data: bytes, source: str) -> PinSet:
    """A pin set from a file, checked; ``BadPins`` saying what is wrong with it."""
    return checked(parsed(data, source), source)


def loaded(path: str, data: bytes, file: FileId) -> tuple[Pins, Sections]:
    """The digests of the pin file ``data`` read from ``path``, each checked against
    its definition (``BadPins`` naming the first that does not match), and where each
    server's part is in it, if it is laid out as mcpd writes it."""
    out = Pins()
    pins = parsed(data, path)
    for alias, pinned in pins.servers.items():
        server = out.servers[alias] = ServerPins(pinned.approved)
        for kind, text in pinned.forgotten.items():
            marks = decoded(text)
            if marks is None:
                raise BadPins(
                    f"{path}: {alias}: the forgotten {kind} names are not as mcpd writes them"
                )
            server.forgotten[kind] = marks
        for kind in KINDS:
            digests = server.of(kind)
            for name, record in pinned.of(kind).items():
                digest = parsed_digest(record.digest)
                kept = bare(record)
                if digest is None or (not kept and verified(record, digest) is None):
                    raise BadPins(
                        f"{path}: {alias} {kind} {name!r}: the digest does not match the definition"
                    )
                digests[name] = digest
                if kept:
                    server.bare.add((kind, name))
                if pins.format != FORMAT:
                    server.former.add((kind, name))
                if record.reviewed:
                    server.reviewed.add((kind, name))
    return out, _found_sections(data, file, list(pins.servers))


def _found_sections(data: bytes, file: FileId, aliases: list[str]) -> Sections:
    """Where each server's part is, if the file is laid out as mcpd writes it: each
    part right after its server's name at the start of a line, the next right after a
    comma, the last followed by the file's end (else none is known)."""
    spans: dict[str, tuple[int, int]] = {}
    at = 0
    for n, alias in enumerate(aliases):
        opening = header(alias)
        start = data.find(opening, at)
        if start < 0 or (n and data[at:start] != b","):
            return Sections(file, {})
        start += len(opening)
        following = header(aliases[n + 1]) if n + 1 < len(aliases) else _END_OF_FILE
        bound = data.find(following, start) if n + 1 < len(aliases) else len(data)
        end = data.rfind(END_OF_SERVER, start, bound)
        if bound < 0 or end < 0:
            return Sections(file, {})
        at = end + len(END_OF_SERVER)
        spans[alias] = (start, at)
    if aliases and data[at:].rstrip(b"\n") != _END_OF_FILE:
        return Sections(file, {})
    return Sections(file, spans)


def definitions_in_file(
    path: str, sections: Sections | None, wanted: list[Wanted]
) -> FoundDefinitions:
    """The definitions the file holds of ``wanted`` that match their digests: from
    each server's part when ``sections`` holds for the file, else from all of it."""
    out: FoundDefinitions = {}
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        by_server: dict[str, PinnedServer | None] = {alias: None for alias, *_ in wanted}
        if sections is not None and file_id(os.fstat(fd)) == sections.file:
            for alias in by_server:
                span = sections.spans.get(alias)
                if span is not None:
                    part = os.pread(fd, span[1] - span[0], span[0])
                    with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                        by_server[alias] = server_decoder.decode(part)
        if any(server is None for server in by_server.values()):
            with os.fdopen(os.dup(fd), "rb") as f:
                whole = parsed(f.read(), path)
            for alias, server in by_server.items():
                by_server[alias] = server if server is not None else whole.servers.get(alias)
    finally:
        os.close(fd)
    for alias, kind, name, digest in wanted:
        server = by_server[alias]
        record = None if server is None else server.of(kind).get(name)
        found = None if record is None else verified(record, digest)
        if found is not None:
            out[(alias, kind, name)] = found.copy()  # not the whole part's bytes
    return out


def exported(path: str, aliases: list[str] | None) -> PinSet:
    """The file's pins of these servers (all), checked, as an export has them."""
    found = read_pin_file(path)
    pins = decode(found[0], path) if found is not None else PinSet()
    pins.servers = {
        a: s for a, s in sorted(pins.servers.items()) if aliases is None or a in aliases
    }
    for server in pins.servers.values():
        server.forgotten = {}  # this daemon's record of its servers, not pins to share
    return pins
