"""The arguments an audit record keeps with ``audit_arguments``: mcpd's secrets masked,
as JSON text of at most ``MAX_KEPT`` bytes; and, when they give a key twice, as the
text they were sent in.

JSON parsers disagree on an object that gives a key twice: most keep the last value,
some the first, some refuse it. The server is sent the arguments' bytes as they came,
so decoded, a record would show one value where the server may have read the other.
Arguments that give a key twice, at any depth, are kept as their JSON text instead (a
string in the record): every key and value in the order sent, each string and number
masked as it would be decoded. Whether a key comes twice is looked for only here, in
the writer's thread, for arguments a record keeps; the call path never looks.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Final

import msgspec

from ..policy.masking import SecretSet

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
    text they came in when they give a key twice; else a note of why they are not."""
    if len(raw) > MAX_KEPT:
        return too_large(len(raw))
    try:
        value = msgspec.json.decode(raw)
        twice = _gives_a_key_twice(raw)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return INVALID
    try:
        kept: msgspec.Raw | str = (
            _masked_text(raw, secrets) if twice else msgspec.Raw(_encode(secrets.mask_value(value)))
        )
    except RecursionError:
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


class _Number(str):
    """A number as it was written (decoded, it might read otherwise: ``1.10``, a digit
    past a float's)."""


class _Pairs(list[tuple[str, object]]):
    """An object's members in the order sent, a key given twice and all."""


def _masked_text(raw: bytes | msgspec.Raw, secrets: SecretSet) -> str:
    value = json.loads(bytes(raw), object_pairs_hook=_Pairs, parse_int=_Number, parse_float=_Number)
    out: list[str] = []
    _write(value, secrets.mask, out)
    return "".join(out)


def _write(value: object, mask: Callable[[str], str], out: list[str]) -> None:
    if isinstance(value, _Pairs):
        out.append("{")
        for n, (key, member) in enumerate(value):
            out += ("," if n else "", _string(mask(key)), ":")
            _write(member, mask, out)
        out.append("}")
    elif isinstance(value, list):
        out.append("[")
        for n, item in enumerate(value):
            if n:
                out.append(",")
            _write(item, mask, out)
        out.append("]")
    elif isinstance(value, _Number):
        masked = mask(value)  # a number whose digits hold a secret becomes its marker
        out.append(str(value) if masked == value else _string(masked))
    elif isinstance(value, str):
        out.append(_string(mask(value)))
    else:
        out.append(_encode(value).decode())  # true, false, null


def _string(text: str) -> str:
    return _encode(text).decode()
