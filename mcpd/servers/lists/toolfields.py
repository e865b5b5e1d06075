"""The members of a tool's fields that hosts check, read before agents are shown it.

A host validates each tool of a ``tools/list`` against its SDK's schema and refuses the
whole list over one tool it cannot take: a schema's ``required`` that is not an array of
strings, or a ``properties`` that is not an object of schemas; an ``execution`` whose
``taskSupport`` is not one MCP names; an icon whose ``src`` is not a string. No era
allows these, so they are the server's mistakes; each function here names the one it
finds (None: none), for ``toolshape`` to leave the field off or the tool out.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw

from protocol.shown.visible import quote


class SchemaMembers(msgspec.Struct):
    """The members of a JSON schema a host reads."""

    type: Any = UNSET
    properties: Any = UNSET
    required: Any = UNSET


class _Execution(msgspec.Struct):
    taskSupport: Any = UNSET


class _Icon(msgspec.Struct):
    src: Any = UNSET
    mimeType: Any = UNSET
    sizes: Any = UNSET
    theme: Any = UNSET


schema_members: Final = msgspec.json.Decoder(SchemaMembers)
_execution: Final = msgspec.json.Decoder(_Execution)
_icons: Final = msgspec.json.Decoder(list[_Icon])
TASK_SUPPORT: Final = ("forbidden", "optional", "required")
THEMES: Final = ("light", "dark")


def schema_fault(members: SchemaMembers) -> str | None:
    """What of a schema's ``properties`` and ``required`` no host can take."""
    if members.required is not UNSET and not _strings(members.required):
        return '"required" is not an array of strings'
    props = members.properties
    if props is UNSET:
        return None
    if not isinstance(props, dict):
        return '"properties" is not an object'
    for name, sub in props.items():
        # true and false are schemas too: shown to legacy agents as objects (eras).
        if not isinstance(sub, dict | bool):
            return f"property {quote(name, 40)} is not a schema"
    return None


def execution_fault(raw: Raw) -> str | None:
    """What of an ``execution`` no host can take (its kind is checked already)."""
    try:
        support = _execution.decode(raw).taskSupport
    except (msgspec.DecodeError, RecursionError):
        return "not an object"
    if support is UNSET or (isinstance(support, str) and support in TASK_SUPPORT):
        return None
    return f'"taskSupport" is not one of {", ".join(TASK_SUPPORT)}'


def icons_fault(raw: Raw) -> str | None:
    """What of a tool's ``icons`` no host can take (its kind is checked already)."""
    try:
        icons = _icons.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return "an icon is not an object"
    for i, icon in enumerate(icons):
        if not isinstance(icon.src, str):
            return f'icon {i}\'s "src" is not a string'
        if icon.mimeType is not UNSET and not isinstance(icon.mimeType, str):
            return f'icon {i}\'s "mimeType" is not a string'
        if icon.sizes is not UNSET and not _strings(icon.sizes):
            return f'icon {i}\'s "sizes" is not an array of strings'
        if icon.theme is not UNSET and not (isinstance(icon.theme, str) and icon.theme in THEMES):
            return f'icon {i}\'s "theme" is not light or dark'
    return None


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
