"""MCP message types for both eras: 2026-07-28 (stateless) and the legacy handshake.

Fields that mcpd passes on without looking inside (schemas, icons, arguments, opaque
request state) stay ``msgspec.Raw`` so their bytes reach the other side unchanged.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..jsonrpc.messages import JsonObject
from ..shown.visible import quote

LATEST_MODERN: Final = "2026-07-28"
MODERN_VERSIONS: Final = ("2026-07-28",)
LATEST_LEGACY: Final = "2025-11-25"
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
ALL_VERSIONS: Final = MODERN_VERSIONS + LEGACY_VERSIONS

KEY_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
KEY_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
KEY_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
KEY_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
KEY_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
KEY_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
KEY_PROGRESS_TOKEN: Final = "progressToken"
# The keys of ``_meta`` that belong to the protocol (mcpd sets its own upstream).
RESERVED_META_PREFIX: Final = "io.modelcontextprotocol/"

COMPLETE: Final = "complete"
INPUT_REQUIRED: Final = "input_required"

Era: TypeAlias = Literal["modern", "legacy"]
Meta: TypeAlias = dict[str, object]


def request_meta(
    version: str,
    capabilities: JsonObject,
    client_info: Implementation | None = None,
    extra: Meta | None = None,
) -> Meta:
    """The ``_meta`` every modern request carries on its ``params``."""
    meta: Meta = dict(extra) if extra else {}
    meta[KEY_PROTOCOL_VERSION] = version
    meta[KEY_CLIENT_CAPABILITIES] = capabilities
    if client_info is not None:
        meta[KEY_CLIENT_INFO] = client_info
    return meta


class Implementation(msgspec.Struct, omit_defaults=True):
    name: str
    version: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    websiteUrl: str | UnsetType = UNSET


class MetaOnlyParams(msgspec.Struct, omit_defaults=True):
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class DiscoverResult(msgspec.Struct):
    """A discover result as mcpd sends it (``greeting.Discovered`` is one received)."""

    supportedVersions: list[str] = msgspec.field(default_factory=list)
    capabilities: dict[str, Any] = msgspec.field(default_factory=dict)
    instructions: str | UnsetType | None = UNSET
    ttlMs: int | UnsetType | None = UNSET
    cacheScope: str | UnsetType = UNSET
    resultType: str | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


# How much of a ttlMs that is no whole number a complaint about it shows.
_TTL_SHOWN: Final = 40


def ttl_of(given: Raw | UnsetType) -> tuple[int, str | None]:
    """A cacheable result's ``ttlMs`` (as the server wrote it) as the milliseconds the
    result may be kept, and what is wrong with it (None: nothing).

    The spec's is a whole number of at least 0, absent or negative meaning 0. JSON writes
    a whole number in any form (``6e4`` too), and one of any size is kept as it is.
    Anything else (a fraction, a string, a number too large to read) is no ttl: 0, and
    why, never a reason to refuse the result it came in."""
    if given is UNSET:
        return 0, None
    try:
        value = msgspec.json.decode(given)
    except msgspec.DecodeError:  # a number past what a float holds
        return 0, _no_ttl(given)
    if value is None:
        return 0, None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return 0, _no_ttl(given)
    return max(value, 0), None


def _no_ttl(given: Raw) -> str:
    written = quote(bytes(given).decode("utf-8", "replace"), _TTL_SHOWN)
    return f"its ttlMs {written} is no whole number of milliseconds mcpd can read"


class InitializeParams(msgspec.Struct):
    protocolVersion: str
    capabilities: dict[str, Any] = msgspec.field(default_factory=dict)
    clientInfo: Implementation | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class InitializeResult(msgspec.Struct):
    protocolVersion: str
    capabilities: dict[str, Any] = msgspec.field(default_factory=dict)
    serverInfo: Implementation | UnsetType = UNSET
    instructions: str | UnsetType | None = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class Tool(msgspec.Struct):
    name: str
    title: str | UnsetType | None = UNSET
    description: str | UnsetType | None = UNSET
    inputSchema: Raw = msgspec.field(default_factory=lambda: Raw(b'{"type":"object"}'))
    outputSchema: Raw | UnsetType = UNSET
    annotations: dict[str, Any] | UnsetType | None = UNSET
    icons: Raw | UnsetType = UNSET
    execution: Raw | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(name="_meta", default=UNSET)


class ListParams(msgspec.Struct, omit_defaults=True):
    """The params of a page request of any list: tools, prompts, resources, templates."""

    cursor: str | UnsetType | None = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class ResultMeta(msgspec.Struct):
    """A result's ``_meta`` as a client reads it: for who the server says it is, the
    rest skipped unread."""

    serverInfo: Raw | UnsetType = msgspec.field(name=KEY_SERVER_INFO, default=UNSET)


class ListToolsPage(msgspec.Struct, omit_defaults=True):
    """One page as received; tools stay raw so one bad tool cannot sink the page."""

    tools: list[Raw] = msgspec.field(default_factory=list)
    nextCursor: str | UnsetType | None = UNSET
    ttlMs: Raw | UnsetType = UNSET  # as written: ``ttl_of``
    cacheScope: str | UnsetType = UNSET
    resultType: str | UnsetType = UNSET
    meta: ResultMeta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class ListToolsResult(msgspec.Struct, omit_defaults=True):
    """A page as mcpd sends it to agents."""

    tools: list[Any]
    nextCursor: str | UnsetType = UNSET
    resultType: str | UnsetType = UNSET
    ttlMs: int | UnsetType = UNSET
    cacheScope: str | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class CallToolParams(msgspec.Struct, omit_defaults=True):
    name: str
    arguments: Raw | UnsetType = UNSET
    inputResponses: Raw | UnsetType = UNSET
    requestState: Raw | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class ContentKind(msgspec.Struct):
    """A content block's type, and its text as JSON (not made into a string); the
    rest of it is passed through unread."""

    type: str = ""
    text: Raw | UnsetType = UNSET


class ResourceHead(msgspec.Struct):
    """An embedded resource's text, which counts as a text block's does."""

    text: str | UnsetType = UNSET


class ContentHead(msgspec.Struct):
    """Enough of a content block to measure text."""

    type: str = ""
    text: str | UnsetType = UNSET
    resource: ResourceHead | UnsetType = UNSET


class CallToolResultFate(msgspec.Struct):
    """What decides a result's fate, apart from its content; and, kept as written, the
    parts an agent's era may call for changing (``structuredContent``, ``_meta``)."""

    resultType: str | UnsetType | None = UNSET
    isError: bool | None = None
    inputRequests: dict[str, Any] | UnsetType | None = UNSET
    requestState: Raw | UnsetType = UNSET
    structuredContent: Raw | UnsetType = UNSET
    meta: Raw | UnsetType = msgspec.field(name="_meta", default=UNSET)


class CallToolResultKinds(CallToolResultFate):
    """For a result too short to need cutting: its blocks' types; texts are skipped,
    not made into strings."""

    content: list[ContentKind] | None = None


class CallToolResultHead(CallToolResultFate):
    """For a result that may need cutting: each block's text, to measure."""

    content: list[ContentHead] | None = None


class TextContent(msgspec.Struct, tag_field="type", tag="text", omit_defaults=True):
    text: str
    annotations: dict[str, Any] | UnsetType = UNSET


class CallToolResult(msgspec.Struct, omit_defaults=True):
    """A result mcpd builds itself (outages, unknown tools, demo servers)."""

    content: list[Any]
    isError: bool | UnsetType = UNSET
    structuredContent: Any = UNSET
    resultType: str | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class ProgressParams(msgspec.Struct, omit_defaults=True):
    progressToken: str | int
    # int | float keeps "3" as 3 on the way through, not 3.0.
    progress: int | float
    total: int | float | UnsetType = UNSET
    message: str | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class CancelledParams(msgspec.Struct, omit_defaults=True):
    requestId: str | int | UnsetType = UNSET
    reason: str | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


def text_result(text: str, *, is_error: bool = False, meta: Meta | None = None) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(text)],
        isError=True if is_error else UNSET,
        meta=meta if meta else UNSET,
    )
