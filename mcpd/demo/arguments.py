"""Argument checks for demo tools: the few JSON Schema keywords the demo tools use.

Not a validator: ``type``, ``required``, ``additionalProperties: false``, ``enum``,
``minimum``/``maximum`` and ``minLength``, enough to turn a bad call into a tool
error that says what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

_JSON_TYPES: Final[Mapping[str, tuple[type, ...]]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


def check_demo_arguments(schema: Mapping[str, Any], args: Any) -> str | None:
    """What is wrong with ``args``, or None."""
    if not isinstance(args, dict):
        return "arguments must be an object"
    properties: Mapping[str, Any] = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in args:
            return f"missing required argument {name!r}"
    for name, value in args.items():
        sub = properties.get(name)
        if sub is None:
            if schema.get("additionalProperties") is False:
                return f"unexpected argument {name!r}"
            continue
        problem = _check_value(sub, value)
        if problem is not None:
            return f"argument {name!r} {problem}"
    return None


def _check_value(schema: Mapping[str, Any], value: Any) -> str | None:
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
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        return f"must be one of {schema['enum']!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"must be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"must be at most {schema['maximum']}"
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        return f"must have at least {schema['minLength']} characters"
    return None


def _same(a: Any, b: Any) -> bool:
    """Whether two values are one JSON value: Python takes true for 1, JSON does not
    (though 1.0 is 1)."""
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)
