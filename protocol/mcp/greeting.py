"""What a server says of itself as a client opens a session (a 2026-07-28 discover
result, a legacy initialize result), read for what a client acts on and nothing more.

A server's capabilities are its to fill: ``experimental``, extensions nobody knows,
any key at all, as large as its messages may be. A client acts on a few of their
parts (``ServerCapabilities``), and those are all it keeps, for as long as the session
lasts: the rest is skipped as it is read, never made into values. A part that is not
the shape the spec gives it (an object where one is due, ``true`` for a flag) counts
as not declared: a sloppy server still gets a session.
"""

from __future__ import annotations

from typing import Final, TypeGuard, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

from .core import Implementation, ResultMeta
from .features import TASKS_EXTENSION

# The most bytes of ``supportedVersions`` read: a list of version strings takes far
# fewer; a longer one lists none a client can pick (``versions_unread`` says why).
VERSIONS_BYTES: Final = 4096


class ServerCapabilities(msgspec.Struct, frozen=True, kw_only=True):
    """The capabilities a client acts on, each declared or not."""

    tools_changed: bool = False  # tools.listChanged
    prompts: bool = False
    prompts_changed: bool = False
    resources: bool = False
    resources_changed: bool = False
    subscribe: bool = False  # resources.subscribe
    logging: bool = False
    # A legacy server's task-augmented tools/call (tasks.requests.tools.call).
    tool_tasks: bool = False
    tasks: bool = False  # the 2026-07-28 tasks extension


class Declared(msgspec.Struct):
    """A result's ``capabilities`` as read: each part a client acts on as the server
    wrote it, and nothing of any other (``server_capabilities`` reads the parts)."""

    tools: Raw | UnsetType = UNSET
    prompts: Raw | UnsetType = UNSET
    resources: Raw | UnsetType = UNSET
    logging: Raw | UnsetType = UNSET
    tasks: Raw | UnsetType = UNSET
    extensions: Raw | UnsetType = UNSET


class Discovered(msgspec.Struct):
    """A ``server/discover`` result as a client reads it."""

    supportedVersions: Raw | UnsetType = UNSET
    capabilities: Declared = msgspec.field(default_factory=Declared)
    instructions: str | UnsetType | None = UNSET
    ttlMs: Raw | UnsetType = UNSET  # as written: ``core.ttl_of``
    cacheScope: str | UnsetType = UNSET
    resultType: str | UnsetType = UNSET
    meta: ResultMeta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class Initialized(msgspec.Struct):
    """A legacy ``initialize`` result as a client reads it."""

    protocolVersion: str
    capabilities: Declared = msgspec.field(default_factory=Declared)
    serverInfo: Implementation | UnsetType = UNSET
    instructions: str | UnsetType | None = UNSET


class _Identity(msgspec.Struct):
    name: Raw | UnsetType = UNSET
    version: Raw | UnsetType = UNSET
    title: Raw | UnsetType = UNSET


class _Listing(msgspec.Struct):
    listChanged: Raw | UnsetType = UNSET
    subscribe: Raw | UnsetType = UNSET


class _ToolCall(msgspec.Struct):
    call: Raw | UnsetType = UNSET


class _TaskRequests(msgspec.Struct):
    tools: _ToolCall | None = None


class _Tasks(msgspec.Struct):
    requests: _TaskRequests | None = None


class _Extensions(msgspec.Struct):
    tasks: Raw | UnsetType = msgspec.field(name=TASKS_EXTENSION, default=UNSET)


_listing: Final = msgspec.json.Decoder(_Listing)
_tasks: Final = msgspec.json.Decoder(_Tasks)
_extensions: Final = msgspec.json.Decoder(_Extensions)
_identity: Final = msgspec.json.Decoder(_Identity)
_versions: Final = msgspec.json.Decoder(list[str])
_text: Final = msgspec.json.Decoder(str)
_TRUE: Final = b"true"
_BRACE: Final = b"{"
_QUOTE: Final = b'"'
S = TypeVar("S", bound=msgspec.Struct)
_NO_LISTING: Final = _Listing()


def server_capabilities(parts: Declared) -> ServerCapabilities:
    """What a result's ``capabilities`` declare."""
    tools = _read(_listing, parts.tools) or _NO_LISTING
    prompts = _read(_listing, parts.prompts)
    resources = _read(_listing, parts.resources)
    tasks = _read(_tasks, parts.tasks)
    calls = tasks.requests.tools if tasks is not None and tasks.requests is not None else None
    extensions = _read(_extensions, parts.extensions)
    return ServerCapabilities(
        tools_changed=_is_true(tools.listChanged),
        prompts=prompts is not None,
        prompts_changed=prompts is not None and _is_true(prompts.listChanged),
        resources=resources is not None,
        resources_changed=resources is not None and _is_true(resources.listChanged),
        subscribe=resources is not None and _is_true(resources.subscribe),
        logging=_is_object(parts.logging),
        tool_tasks=calls is not None and _is_object(calls.call),
        tasks=extensions is not None and _is_object(extensions.tasks),
    )


def supported_versions(raw: Raw | UnsetType) -> list[str]:
    """The versions a discover result lists (none, for a list that is not one of
    strings, or is longer than ``VERSIONS_BYTES``)."""
    if isinstance(raw, UnsetType) or len(raw) > VERSIONS_BYTES:
        return []
    try:
        return _versions.decode(raw)
    except msgspec.ValidationError:
        return []


def versions_unread(raw: Raw | UnsetType) -> str | None:
    """Why a discover result's ``supportedVersions`` was not read for the versions it
    lists, in words that name its size (None: it was, or there is none)."""
    if isinstance(raw, UnsetType) or len(raw) <= VERSIONS_BYTES:
        return None
    return (
        f"its supportedVersions is {len(raw):,} bytes long, more than the "
        f"{VERSIONS_BYTES:,} mcpd reads: which versions it speaks is not known"
    )


def server_info(meta: ResultMeta | UnsetType) -> dict[str, str] | None:
    """The strings of the ``serverInfo`` a result's ``_meta`` gives (name, version,
    title); None when it gives none that is an object."""
    if isinstance(meta, UnsetType):
        return None
    info = _read(_identity, meta.serverInfo)
    if info is None:
        return None
    said = {"name": info.name, "version": info.version, "title": info.title}
    return {key: _text.decode(value) for key, value in said.items() if _is_string(value)}


def _read(decoder: msgspec.json.Decoder[S], raw: Raw | UnsetType) -> S | None:
    """``raw`` as the decoder's struct; None when absent or not that shape."""
    if not _is_object(raw):
        return None
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError:
        return None


def _is_object(raw: Raw | UnsetType) -> TypeGuard[Raw]:
    # A value msgspec handed over starts at its first character.
    return not isinstance(raw, UnsetType) and bytes(memoryview(raw)[:1]) == _BRACE


def _is_string(raw: Raw | UnsetType) -> TypeGuard[Raw]:
    return not isinstance(raw, UnsetType) and bytes(memoryview(raw)[:1]) == _QUOTE


def _is_true(raw: Raw | UnsetType) -> bool:
    return not isinstance(raw, UnsetType) and len(raw) == len(_TRUE) and bytes(raw) == _TRUE
