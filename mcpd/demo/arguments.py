"""Argument checks for demo tools: the few JSON Schema keywords the demo tools use.

Not a validator: ``type``, ``required``, ``additionalProperties: false``, ``enum``,
``minimum``/``maximum`` and ``minLength``, enough to turn a bad call into a tool
error that says what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypeGuard

from protocol.jsonrpc import messages as rpc

_JSON_TYPES: Final[Mapping[str, tuple[type, ...]]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


def check_demo_arguments(schema: Mapping[str, rpc.Json], args: rpc.Json) -> str | None:
    """What is wrong with ``args``, or None."""
    if not isinstance(args, dict):
        return "arguments must be an object"
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        properties = {}
    required = schema.get("required", ())
    for name in required if isinstance(required, list) else ():
        if isinstance(name, str) and name not in args:
            return f"missing required argument {name!r}"
    for name, value in args.items():
        sub = properties.get(name)
        if sub is None:
            if schema.get("additionalProperties") is False:
                return f"unexpected argument {name!r}"
            continue
        problem = _check_value(sub, value) if isinstance(sub, dict) else None
        if problem is not None:
            return f"argument {name!r} {problem}"
    return None


def string_argument(args: rpc.JsonObject, name: str, default: str | None = None) -> str:
    """The string argument ``name`` of arguments the tool's schema passed."""
    value = args.get(name, default)
    if not isinstance(value, str):
        raise TypeError(f"argument {name!r} is not a string")
    return value


def integer_argument(args: rpc.JsonObject, name: str, default: int) -> int:
    """The integer argument ``name`` of arguments the tool's schema passed: JSON has
    one number type, so ``2.0`` passes as the integer it is."""
    value = args.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise TypeError(f"argument {name!r} is not an integer")
    return int(value)


def _check_value(schema: rpc.JsonObject, value: rpc.Json) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _JSON_TYPES:
        ok = isinstance(value, _JSON_TYPES[kind])
        # JSON has one number type: 2.0 is an integer, and true is not one.
        if kind == "integer" and isinstance(value, float):
            ok = value.is_integer()
        if kind in ("integer", "number") and isinstance(value, bool):
            ok = False
        if not ok:
            return f"must be of type {kind}, got {type(value).__name__}"
    options = schema.get("enum")
    if isinstance(options, list) and not any(_same(value, option) for option in options):
        return f"must be one of {options!r}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        least, most = schema.get("minimum"), schema.get("maximum")
        if _is_number(least) and value < least:
            return f"must be at least {least}"
        if _is_number(most) and value > most:
            return f"must be at most {most}"
    shortest = schema.get("minLength", 0)
    if isinstance(value, str) and _is_number(shortest) and len(value) < shortest:
        return f"must have at least {shortest} characters"
    return None


def _is_number(value: rpc.Json) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same(a: rpc.Json, b: rpc.Json) -> bool:
    """Whether two values are one JSON value: Python takes true for 1, JSON does not
    (though 1.0 is 1)."""
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)
