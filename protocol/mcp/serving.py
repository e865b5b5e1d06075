"""The server side of the MCP lifecycle, sans-IO, for both eras on one connection.

mcpd's agent socket and the bundled demo servers share this: it answers
``server/discover``, ``initialize`` and ``ping``, checks the per-request ``_meta`` of
modern requests, and shapes results the way each era expects them.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..jsonrpc import messages as rpc
from . import core as mcp

_meta_probe = msgspec.json.Decoder(mcp.MetaOnlyParams)

R = TypeVar("R", bound=msgspec.Struct)


class RequestContext(msgspec.Struct):
    """What the server learned from one request's envelope."""

    era: mcp.Era
    version: str
    meta: mcp.Meta
    capabilities: dict[str, Any]

    @property
    def progress_token(self) -> str | int | None:
        """The request's ``_meta.progressToken``, if it asked for progress."""
        token = self.meta.get(mcp.KEY_PROGRESS_TOKEN)
        # bool is an int, and never a token.
        return token if isinstance(token, str | int) and not isinstance(token, bool) else None


class AgentSession:
    """Per-connection lifecycle state. One instance per agent or client connection."""

    def __init__(
        self,
        info: mcp.Implementation,
        capabilities: rpc.JsonObject,
        instructions: str | None = None,
        *,
        ttl_ms: int = 0,
        cache_scope: str = "public",
    ) -> None:
        self.info = info
        self.capabilities = capabilities
        self.instructions = instructions
        self.modern_versions: tuple[str, ...] = mcp.MODERN_VERSIONS
        self.legacy_versions: tuple[str, ...] = mcp.LEGACY_VERSIONS
        self.ttl_ms = ttl_ms
        self.cache_scope = cache_scope
        self.legacy_version: str | None = None
        self.legacy_capabilities: dict[str, Any] = {}
        self.client_info: mcp.Implementation | UnsetType | None = None

    @property
    def supported(self) -> list[str]:
        return [*self.modern_versions, *self.legacy_versions]

    def context(self, req: rpc.Request) -> RequestContext:
        """Classify a request's era and check its ``_meta``; raises ``rpc.RPCError``."""
        return self.context_of(_request_meta(req.params))

    def ping_context(self, req: rpc.Request) -> RequestContext | None:
        """``context`` for a ``ping``, which is answered whatever its ``_meta``: None
        where any other request would be refused."""
        try:
            return self.context(req)
        except rpc.RPCError:
            return None

    def context_of(self, meta: mcp.Meta | None) -> RequestContext:
        """``context`` for a ``_meta`` the caller already decoded with the params."""
        version = meta.get(mcp.KEY_PROTOCOL_VERSION) if meta else None
        if version is None and self.legacy_version is not None:
            return RequestContext(
                "legacy", self.legacy_version, meta or {}, self.legacy_capabilities
            )
        if version is None:
            raise rpc.RPCError(
                rpc.INVALID_PARAMS,
                f"params._meta must carry {mcp.KEY_PROTOCOL_VERSION!r} and "
                f"{mcp.KEY_CLIENT_CAPABILITIES!r} (or send initialize first)",
            )
        if not isinstance(version, str) or version not in self.modern_versions:
            # A legacy version is spoken after initialize, never named in _meta: offered
            # to a request that named it, it would only be refused again.
            named_legacy = isinstance(version, str) and version in self.legacy_versions
            supported = list(self.modern_versions) if named_legacy else self.supported
            raise rpc.RPCError(
                rpc.UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": supported, "requested": version},
            )
        caps = meta.get(mcp.KEY_CLIENT_CAPABILITIES) if meta else None
        if not isinstance(caps, dict):
            raise rpc.RPCError(
                rpc.INVALID_PARAMS,
                f"params._meta is missing the required key {mcp.KEY_CLIENT_CAPABILITIES!r}",
            )
        return RequestContext("modern", version, meta or {}, caps)

    def discover(self, ctx: RequestContext) -> mcp.DiscoverResult:
        result = mcp.DiscoverResult(
            supportedVersions=list(self.modern_versions),
            capabilities=self.capabilities,
            instructions=self.instructions if self.instructions else UNSET,
        )
        return self.complete(ctx, result, cacheable=True)

    def initialize(self, params: Raw | None) -> mcp.InitializeResult:
        p = rpc.decode_as(params, mcp.InitializeParams)
        asked = p.protocolVersion
        version = asked if asked in self.legacy_versions else self.legacy_versions[0]
        self.legacy_version = version
        self.legacy_capabilities = p.capabilities
        self.client_info = p.clientInfo
        legacy_caps = _legacy_capabilities(self.capabilities)
        return mcp.InitializeResult(
            protocolVersion=version,
            capabilities=legacy_caps,
            serverInfo=self.info,
            instructions=self.instructions if self.instructions else UNSET,
        )

    def finish(self, ctx: RequestContext, result: dict[str, object]) -> dict[str, object]:
        """Add what each era expects on a result built as a dict."""
        if ctx.era == "modern":
            result.setdefault("resultType", mcp.COMPLETE)
            meta = result.setdefault("_meta", {})
            if isinstance(meta, dict):
                meta.setdefault(mcp.KEY_SERVER_INFO, self.info)
        return result

    def complete(self, ctx: RequestContext, result: R, *, cacheable: bool = False) -> R:
        """``finish`` for a result struct with ``resultType`` and ``_meta`` fields.

        ``cacheable`` results (discover and the list methods) also get ``ttlMs`` and
        ``cacheScope``, which modern clients require on them. Fields the caller
        already set are kept; legacy results are returned unchanged.
        """
        if ctx.era != "modern":
            return result
        # The result types share these fields by name, not by a base class.
        fields = msgspec.structs.asdict(result)
        meta = dict(fields.get("meta") or {})
        meta.setdefault(mcp.KEY_SERVER_INFO, self.info)
        changes: dict[str, Any] = {"meta": meta}
        if fields.get("resultType", UNSET) is UNSET:
            changes["resultType"] = mcp.COMPLETE
        if cacheable:
            if fields.get("ttlMs", UNSET) in (UNSET, None):
                changes["ttlMs"] = self.ttl_ms
            if fields.get("cacheScope", UNSET) is UNSET:
                changes["cacheScope"] = self.cache_scope
        return msgspec.structs.replace(result, **changes)


def _request_meta(params: Raw | None) -> mcp.Meta | None:
    if params is None:
        return None
    try:
        probe = _meta_probe.decode(params)
    except (msgspec.DecodeError, RecursionError):
        raise rpc.RPCError(rpc.INVALID_PARAMS, "params must be an object") from None
    return None if probe.meta is UNSET else probe.meta


def _legacy_capabilities(caps: dict[str, Any]) -> dict[str, Any]:
    # Legacy clients do not know about extensions; keep the core capability keys.
    return {k: v for k, v in caps.items() if k != "extensions"}
