"""msgspec's validation errors said in the config's words: an unknown key with the key
it is nearest to (or the keys its table takes), a value of the wrong type with what
the key takes and what it was given, a value outside a key's few with those few.
Every error keeps the path of its key."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from protocol.masking import masked, masked_repr

from ..credentials.exposure import secret_name
from ..tables.model import Config, ConfigError

__all__ = ["SET_BY_MCPD", "validation_error"]

# Struct fields mcpd fills in as it reads a file, which the file may not set.
SET_BY_MCPD: Final = frozenset(
    {"source", "state_path", "variables", "secret_files", "held_secrets", "unresolved"}
)

# msgspec's message ends with where the value is; only that end is read as a path, as
# the message before it may quote a value holding any text.
_AT_RE: Final = re.compile(r" - at `\$((?:\.\w+|\[[^\]`]*\])*)`\Z")
# One step of msgspec's path to a value: a key (``.action``) or an item (``[0]``,
# or ``[...]`` for a key of a table it does not name).
_STEP_RE: Final = re.compile(r"\.(\w+)|\[([^\]]*)\]")
_NOTHING: Final = object()
_inspect = msgspec.inspect


def validation_error(
    exc: msgspec.ValidationError, value: object, prefix: str = "", type_: Any = Config
) -> ConfigError:
    """``exc`` of converting ``value`` to ``type_`` as a config error at ``prefix``."""
    said = str(exc)
    m = _AT_RE.search(said)
    message, at = (said[: m.start()], m[1]) if m is not None else (said, "")
    where = (prefix + at).lstrip(".")
    info = _type_at(_inspect.type_info(type_), at)
    unknown = re.match(r"Object contains unknown field `(.+)`", message, re.S)
    if unknown:
        key = unknown.group(1)
        return ConfigError(f"{where}.{key}" if where else key, _unknown(key, info, where))
    if message.startswith("Invalid enum value"):  # the value is taken from the file
        given = _value_at(value, at)
        message = "Invalid enum value"
        if isinstance(given, str):
            message += f" {masked_repr(given)}"
        allowed = _choices(info)
        if allowed:
            message += f"; give one of {', '.join(allowed)}"
    wrong = re.match(r"Expected `[^`]+`, got `(\w+)`\Z", message)
    wanted = _wanted(info) if wrong and info is not None else None
    if wrong and wanted is not None:
        given = _NOTHING if _may_be_secret(where) else _value_at(value, at)
        message = f"expected {wanted}, got {_given(given, wrong.group(1))}"
    return ConfigError(where or "(top level)", message)


def _type_at(info: _inspect.Type | None, path: str) -> _inspect.Type | None:
    """The type of the key at ``path`` (msgspec's: ``.policy[0].action``) in ``info``;
    None where the path leaves what ``info`` says."""
    for name, _ in _STEP_RE.findall(path):
        info = _without_none(info)
        if name and isinstance(info, _inspect.StructType):
            fields = [f.type for f in info.fields if f.encode_name == name]
            info = fields[0] if fields else None
        elif not name and isinstance(info, (_inspect.ListType, _inspect.VarTupleType)):
            info = info.item_type
        elif not name and isinstance(info, _inspect.DictType):
            info = info.value_type
        else:
            return None
    return info


def _without_none(info: _inspect.Type | None) -> _inspect.Type | None:
    """A key that may be left out as what it is when it is given."""
    if isinstance(info, _inspect.UnionType):
        given = [t for t in info.types if not isinstance(t, _inspect.NoneType)]
        if len(given) == 1:
            return given[0]
    return info


def _may_be_secret(where: str) -> bool:
    """The key at ``where`` may hold a secret, whatever its type: a variable or header
    of a server, an auth setting, a key named as a secret. Its value is not written."""
    steps = where.split(".")
    return bool({"env", "headers", "auth"} & set(steps[:-1])) or secret_name(steps[-1])


def _value_at(value: object, path: str) -> object:
    for name, item in _STEP_RE.findall(path):
        if name and isinstance(value, Mapping) and name in value:
            value = value[name]
        elif item.isdigit() and isinstance(value, list) and int(item) < len(value):
            value = value[int(item)]
        else:
            return _NOTHING
    return value


def _unknown(key: str, info: _inspect.Type | None, where: str) -> str:
    """ "unknown key", and the key it was most likely meant to be: the nearest the table
    takes, else the ones it takes."""
    info = _without_none(info)
    if not isinstance(info, _inspect.StructType):
        return "unknown key"
    keys = sorted(f.encode_name for f in info.fields if f.encode_name not in SET_BY_MCPD)
    near = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    if near:
        return f'unknown key; did you mean "{near[0]}"?'
    table = where or "the top level"
    return f"unknown key; {table} takes {', '.join(keys)}"


def _choices(info: _inspect.Type | None) -> list[str]:
    """The strings a key of type ``info`` may be, where it takes a few (a ``Literal``)."""
    types = info.types if isinstance(info, _inspect.UnionType) else (info,)
    literals = [t for t in types if isinstance(t, _inspect.LiteralType)]
    return [f'"{v}"' for t in literals for v in t.values if isinstance(v, str)]


def _wanted(info: _inspect.Type) -> str | None:
    """What a key of type ``info`` takes, as a TOML file writes it; None for a type
    these words do not cover."""
    if isinstance(info, _inspect.UnionType):
        others = (_inspect.NoneType, _inspect.LiteralType)
        alternatives = [_wanted(t) for t in info.types if not isinstance(t, others)]
        choices = _choices(info)
        if choices:
            alternatives.append(f"one of {', '.join(choices)}")
        if None in alternatives or not alternatives:
            return None
        return " or ".join(a for a in alternatives if a is not None)
    if isinstance(info, _inspect.LiteralType):
        return f"one of {', '.join(_choices(info))}"
    if isinstance(info, (_inspect.ListType, _inspect.VarTupleType, _inspect.SetType)):
        item = _wanted(info.item_type)
        if item is None:
            return "an array"
        return (
            f"an array, each {item}"
            if item.startswith("one of")
            else f"an array of {_plural(item)}"
        )
    words: dict[type[_inspect.Type], str] = {
        # Every number of seconds in the config, and only they, may have a fraction.
        _inspect.FloatType: "a number of seconds",
        _inspect.IntType: "a whole number",
        _inspect.StrType: "a string",
        _inspect.BoolType: "true or false",
        _inspect.DictType: "a table",
        _inspect.StructType: "a table",
    }
    return words.get(type(info))


def _plural(one: str) -> str:
    """``a string`` as ``strings``: what an array of them holds."""
    if one.startswith(("a ", "an ")):
        noun, _, rest = one.split(" ", 1)[1].partition(" ")
        return f"{noun}s{' ' + rest if rest else ''}"
    return one


def _given(value: object, kind: str) -> str:
    """The value a key was given, as TOML writes it (a string masked); where it is not
    known, msgspec's ``kind`` of it in words."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f"the string {json.dumps(masked(value), ensure_ascii=False)}"
    if isinstance(value, int | float):
        return f"the number {value}"
    kinds = {"str": "a string", "int": "a whole number", "float": "a number"}
    kinds |= {"bool": "true or false", "array": "an array", "object": "a table"}
    return kinds.get(kind, kind)
