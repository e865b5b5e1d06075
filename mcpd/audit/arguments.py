"""The arguments an audit record keeps with ``audit_arguments``: mcpd's secrets masked,
as JSON of at most ``MAX_KEPT`` bytes; and, when a plain decoding would not keep them
as the server was sent them, as the text they were sent in.

JSON parsers disagree on some arguments: an object that gives a key twice (most keep
the last value, some the first, some refuse it), a number past what a double holds
(``1e400``), half of a UTF-16 pair. The server is sent the arguments' bytes as they
came, so decoded, a record would show what the server may not have read, or nothing
at all. Such arguments are kept as their JSON text instead (a string in the record),
as ``policy.shown.reading`` reads them: every key and value in the order sent, each number
as written, each string masked as it would be decoded. So are arguments whose masking
makes two keys of an object one text (a secret of mcpd's, and its marker written out):
decoded and masked, the object would keep one of them. Whether they are such is looked
for only here, in the writer's thread, for arguments a record keeps; the call path
never looks.
"""

from __future__ import annotations

import json
from typing import Final

import msgspec

from ..policy.redaction.masking import SecretSet
from ..policy.shown.reading import Unshowable, read_arguments
from ..policy.shown.showing import whole_json

# Arguments larger than this are not kept (their size and digest are), and neither are
# those whose masking makes them larger: one record stays a small part of the file.
MAX_KEPT: Final = 64 * 1024
INVALID: Final = "(not valid JSON)"
_encode: Final = msgspec.json.Encoder().encode


def too_large(size: int) -> str:
    """What is kept of arguments of ``size`` bytes, past ``MAX_KEPT``."""
    return f"({size} bytes, more than the {MAX_KEPT} kept)"


def kept_arguments(raw: bytes | msgspec.Raw, secrets: SecretSet) -> msgspec.Raw | str:
    """The arguments as a record keeps them: their JSON, mcpd's secrets masked; the
    text they came in when a decoding would not keep them as sent; else a note of why
    they are not kept."""
    if len(raw) > MAX_KEPT:
        return too_large(len(raw))
    kept: msgspec.Raw | str | None = None
    try:
        value = msgspec.json.decode(raw)
        if not _gives_a_key_twice(raw):
            masked = secrets.mask_value(value)
            if not _keys_merged(value, masked):
                kept = msgspec.Raw(_encode(masked))
    except (msgspec.DecodeError, ValueError, RecursionError):
        pass  # kept as sent, if they can be read so
    if kept is None:
        try:
            kept = whole_json(read_arguments(raw, secrets))
        except Unshowable:
            return INVALID
    size = len(kept.encode()) if isinstance(kept, str) else len(kept)
    return too_large(size) if size > MAX_KEPT else kept


class _Twice(Exception):
    pass


def _refuse_twice(pairs: list[tuple[str, object]]) -> None:
    if len({key for key, _ in pairs}) != len(pairs):
        raise _Twice


def _gives_a_key_twice(raw: bytes | msgspec.Raw) -> bool:
    # Only the keys matter: no object or number is built.
    try:
        json.loads(
            bytes(raw), object_pairs_hook=_refuse_twice, parse_int=_nothing, parse_float=_nothing
        )
    except _Twice:
        return True
    return False


def _nothing(text: str) -> None:
    return None


def _keys_merged(value: object, masked: object) -> bool:
    """Whether masking made two keys of one object the same text (a secret and its
    marker, say), which a decoded object keeps one of: the record would then show an
    object the agent never sent, one of its values gone."""
    if masked is value:
        return False
    if isinstance(value, dict) and isinstance(masked, dict):
        if len(masked) != len(value):
            return True
        return any(map(_keys_merged, value.values(), masked.values()))
    if isinstance(value, list) and isinstance(masked, list):
        return any(map(_keys_merged, value, masked))
    return False
