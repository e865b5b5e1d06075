"""msgspec's validation errors said in the config's words: an unknown key with the key
it is nearest to (or the keys its table takes), a value of the wrong type with what
the key takes and what it was given (its text only where the key never holds a secret),
a value outside a key's few with those few.
Every error keeps the path of its key."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Final

import msgspec

from protocol.shown.stand_ins import masked, masked_repr

from ..tables.model import Config, ConfigError, alias_for

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

# The keys whose values an error may quote: what they take (a mode, a choice, a number of
# seconds or bytes, true or false, an address to listen on) is never a secret. Any
# other key's value, in a table of the model or a server's env, headers or args, is said
# by its kind and length alone, so that a key added later is kept out until named here.
NEVER_SECRET: Final = frozenset(
    {
        # a choice among a few
        *("action", "decider", "discovery", "era", "on_changed_item", "on_finding"),
        *("on_new_item", "relay", "remember", "sandbox", "start", "transport", "type"),
        "token_endpoint_auth_method",
        # seconds
        *("ask_timeout", "backoff_base", "backoff_cap", "call_timeout", "connect_timeout"),
        *("cooldown_base", "cooldown_cap", "crash_window", "first_message_timeout"),
        *("health_interval", "http_header_timeout", "idle_stop", "list_timeout"),
        *("max_call_time", "probe_timeout", "queue_timeout", "stable_after"),
        *("startup_deadline", "timeout"),
        # counts and sizes
        *("audit_files", "audit_max_bytes", "cpu", "failure_threshold", "max_concurrency"),
        *("max_connections", "max_connections_per_uid", "max_description_bytes"),
        *("max_inflight_per_connection", "max_instructions_bytes", "max_item_bytes"),
        *("max_length", "max_line_bytes", "max_list_bytes", "max_list_items", "max_pages"),
        *("max_restarts", "max_tools", "memory", "open_files", "page_size", "processes"),
        *("queue_size", "read_budget", "redirect_port", "result_budget_chars"),
        # true or false
        *("audit", "audit_arguments", "audit_journal", "destructiveHint", "enabled"),
        *("hold_new_servers", "http_allow_remote", "idempotentHint", "network"),
        *("openWorldHint", "readOnlyHint", "redact_patterns", "tls_verify", "trusted"),
        # where mcpd listens
        *("http_listen", "socket_mode"),
    }
)
# The strings that are true or false written another way: the only ones a key that takes
# true or false quotes, as its name (``redact_patterns``) may be read as asking for text.
_BOOLEAN_WORDS: Final = frozenset({"true", "false", "yes", "no", "on", "off", "0", "1"})
_inspect = msgspec.inspect


def validation_error(
    exc: msgspec.ValidationError, value: object, prefix: str = "", type_: type[object] = Config
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
        server = _value_at(value, at)
        nested = _nested_server(where, key, server) if isinstance(server, Mapping) else None
        said = _unknown(key, info, where) if nested is None else nested
        return ConfigError(f"{where}.{key}" if where else key, said)
    quoted = _quoted(at)
    if message.startswith("Invalid enum value"):  # the value is taken from the file
        given = _value_at(value, at)
        message = "Invalid enum value"
        allowed = _choices(info)
        # A choice mistyped is quoted with the one meant; any other string may be a
        # secret written in the wrong key.
        near = _nearest(given, allowed) if quoted and isinstance(given, str) else None
        if isinstance(given, str):
            message += f" {masked_repr(given)}" if near else f": {_said_by_kind(given)}"
        if allowed:
            message += (
                f"; {f'did you mean {near}? ' if near else ''}give one of {', '.join(allowed)}"
            )
    wrong = re.match(r"Expected `[^`]+`, got `(\w+)`\Z", message)
    wanted = _wanted(info) if wrong and info is not None else None
    if wrong and wanted is not None:
        given = _value_at(value, at)
        if wanted == "true or false" and isinstance(given, str):
            quoted = quoted and given.lower() in _BOOLEAN_WORDS
        said = _given(given, wrong[1]) if quoted else _said_by_kind(given, wrong[1])
        message = f"expected {wanted}, got {said}"
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


def _quoted(path: str) -> bool:
    """The value at msgspec's ``path`` may be quoted: it is a key of the model's named
    in ``NEVER_SECRET``, or an item of one's array. A key of a table the model does not
    name (``[...]``: a variable, a header) or a value checked on its own (no path) is not."""
    steps = _STEP_RE.findall(path)
    while steps and steps[-1][1].isdigit():
        steps.pop()
    return bool(steps) and steps[-1][0] in NEVER_SECRET


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


def _nested_server(where: str, key: str, server: Mapping[str, object]) -> str | None:
    """What ``[servers.my.server]`` says, where a server's table was meant: the dot
    made a table inside ``servers.my``. None where ``key`` holds no server's keys."""
    if not where.startswith("servers."):
        return None
    names, inner = [key], server[key]
    while isinstance(inner, Mapping) and "command" not in inner and "url" not in inner:
        tables = [k for k, v in inner.items() if isinstance(v, Mapping)]
        if len(tables) != 1:
            return None
        names.append(tables[0])
        inner = inner[tables[0]]
    if not isinstance(inner, Mapping):
        return None
    written = ".".join((where, *names))
    alias = alias_for(written.removeprefix("servers."))
    return (
        f"unknown key; a dot in a table's name makes a table inside another, so "
        f"[{written}] is not one server: name it [servers.{alias}]"
    )


def _nearest(given: str, choices: list[str]) -> str | None:
    """The choice (as ``_choices`` writes it) ``given`` is a slip of, if any."""
    near = difflib.get_close_matches(json.dumps(given), choices, n=1, cutoff=0.6)
    return near[0] if near else None


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


def _said_by_kind(value: object, kind: str = "str") -> str:
    """The value a key was given, said by its kind and size and not its text."""
    if isinstance(value, str):
        return f"a string of {len(value)} character{'' if len(value) == 1 else 's'}"
    if isinstance(value, list):
        return f"an array of {len(value)} item{'' if len(value) == 1 else 's'}"
    return _given(_NOTHING, kind)


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
