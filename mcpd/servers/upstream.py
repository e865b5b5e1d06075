"""One MCP server as mcpd's client sees it: era detection, paged listing, calls.

No supervision here: an ``Upstream`` wraps a live transport and raises when things go
wrong; the supervisor decides what to do about it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec
import trio
from msgspec import UNSET, Raw, UnsetType

from protocol import headers as mcp_headers
from protocol import jsonrpc as rpc
from protocol import mcp
from protocol.logfields import log_extra
from transports.base import SessionExpired, Transport, TransportError, UnexpectedReply

from .. import __version__

logger = logging.getLogger("mcpd.upstream")

CLIENT_INFO: Final = mcp.Implementation(name="mcpd", version=__version__)
# A daemon has no UI to answer elicitation or sampling, so by default it declares none.
NO_CAPABILITIES: Final[dict[str, Any]] = {}
_RESERVED_META_PREFIX: Final = "io.modelcontextprotocol/"


class ProtocolViolation(TransportError):
    """The server is up but breaks the protocol badly enough that it cannot be used."""


class Incompatible(TransportError):
    """The server speaks no protocol version mcpd does."""


class ListResult(msgspec.Struct):
    tools: list[mcp.Tool]
    ttl_ms: int
    dropped: list[str]
    # "private": the list belongs to the authorization context it was fetched in,
    # which is mcpd's own (its credentials for this server), never an agent's.
    cache_scope: str | None = None


class Upstream:
    def __init__(
        self,
        alias: str,
        transport: Transport,
        *,
        http: bool = False,
        era: str = "auto",
        probe_timeout: float = 5.0,
        max_pages: int = 1000,
    ) -> None:
        self.alias = alias
        self.transport = transport
        self.http = http
        self.era_pref = era
        self.probe_timeout = probe_timeout
        self.max_pages = max_pages
        self.era: mcp.Era | None = None
        self.version = ""
        self.capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        self.server_info: Any = None
        self.discover_ttl_ms = 0
        self.probe_died = False
        # What a legacy server is told at initialize that mcpd can answer (relayed to
        # agents); modern servers learn each request's capabilities with the request.
        self.client_capabilities: dict[str, Any] = NO_CAPABILITIES
        self._plain_meta: mcp.Meta | None = None
        # Per tool, the Mcp-Param-* headers its arguments are mirrored into (HTTP only).
        self._param_headers: dict[str, dict[str, mcp_headers.PropertyPath]] = {}

    # -- lifecycle --

    async def connect(self) -> None:
        """Find out which era the server speaks and finish its handshake."""
        if self.era_pref != "legacy":
            version = mcp.LATEST_MODERN
            for _ in range(2):  # at most one retry, with a version from -32022's list
                outcome = await self._probe(version)
                if isinstance(outcome, mcp.DiscoverResult):
                    chosen = _pick_modern(outcome.supportedVersions)
                    if chosen is not None:
                        self._adopt_discover(outcome, chosen)
                        return
                    break  # a discover result that lists no modern version: legacy
                if outcome is None:
                    break
                version = outcome
            if self.era_pref == "modern":
                raise Incompatible(f"{self.alias}: does not speak protocol {mcp.LATEST_MODERN}")
        await self._initialize()

    async def _probe(self, version: str) -> mcp.DiscoverResult | str | None:
        """A DiscoverResult, a version to retry with, or None for "legacy"."""
        params = mcp.MetaOnlyParams(meta=self._meta(version, NO_CAPABILITIES))
        headers = mcp_headers.request_headers(version, "server/discover") if self.http else None
        try:
            with trio.fail_after(self.probe_timeout):
                raw = await self.transport.request(
                    "server/discover", params, headers=headers, cancellable=False
                )
        except trio.TooSlowError:
            logger.info(
                "%s: no answer to server/discover, trying the legacy handshake",
                self.alias,
                extra=log_extra(self.alias),
            )
            return None
        except rpc.RPCError as exc:
            return self._probe_error(exc, version)
        except UnexpectedReply:
            return None  # an empty or non-JSON-RPC 4xx: a legacy HTTP server
        except TransportError:
            # Some legacy stdio servers exit on any message before initialize; the
            # supervisor then starts the next process straight at the legacy handshake.
            self.probe_died = not self.http
            raise
        try:
            return rpc.decode_as(raw, mcp.DiscoverResult)
        except rpc.InvalidParams:
            return None

    def _probe_error(self, exc: rpc.RPCError, version: str) -> str | None:
        if exc.code == rpc.UNSUPPORTED_PROTOCOL_VERSION:
            supported = exc.data.get("supported") if isinstance(exc.data, dict) else None
            # Modern evidence: retry (once) even with the version just sent, rather
            # than fall back to initialize.
            return _pick_modern(supported if isinstance(supported, list) else [])
        status = getattr(exc, "http_status", None)
        if self.http and (
            exc.code in rpc.MODERN_ERROR_CODES
            or (status == 404 and exc.code == rpc.METHOD_NOT_FOUND)
        ):
            # Modern evidence without a usable discover answer: a modern server that
            # rejects something about the probe. Speak modern with what we know.
            self.era, self.version = "modern", version
            raise ProtocolViolation(f"{self.alias}: server/discover failed: {exc.message}")
        return None

    def _adopt_discover(self, result: mcp.DiscoverResult, version: str) -> None:
        self.era, self.version = "modern", version
        self._set_transport_era("modern")
        self.capabilities = result.capabilities
        self.instructions = result.instructions if isinstance(result.instructions, str) else None
        self.server_info = (result.meta or {}).get(mcp.KEY_SERVER_INFO) if result.meta else None
        ttl = result.ttlMs
        self.discover_ttl_ms = ttl if isinstance(ttl, int) and ttl > 0 else 0

    async def _initialize(self) -> None:
        # A plain dict: the struct omits an empty `capabilities`, which the legacy
        # schema requires (the Python SDK rejects initialize without it).
        params = {
            "protocolVersion": mcp.LATEST_LEGACY,
            "capabilities": self.client_capabilities,
            "clientInfo": CLIENT_INFO,
        }
        self._set_transport_era("legacy")
        try:
            # initialize must never be cancelled (2025-11-25 lifecycle).
            raw = await self.transport.request("initialize", params, cancellable=False)
        except rpc.RPCError as exc:
            if exc.code == rpc.UNSUPPORTED_PROTOCOL_VERSION and self.era_pref != "legacy":
                # A modern server that was slow to answer the probe; probe again.
                supported = exc.data.get("supported") if isinstance(exc.data, dict) else []
                chosen = _pick_modern(supported if isinstance(supported, list) else [])
                if chosen is not None:
                    outcome = await self._probe(chosen)
                    if isinstance(outcome, mcp.DiscoverResult):
                        self._adopt_discover(outcome, chosen)
                        return
            raise Incompatible(f"{self.alias}: initialize failed: {exc.message}") from None
        try:
            result = rpc.decode_as(raw, mcp.InitializeResult)
        except rpc.InvalidParams as exc:
            raise ProtocolViolation(f"{self.alias}: bad initialize result: {exc}") from None
        if result.protocolVersion not in mcp.LEGACY_VERSIONS:
            raise Incompatible(
                f"{self.alias}: server offered protocol {result.protocolVersion!r}; "
                f"mcpd speaks {', '.join(mcp.ALL_VERSIONS)}"
            )
        self.era, self.version = "legacy", result.protocolVersion
        self.capabilities = result.capabilities
        self.instructions = result.instructions if isinstance(result.instructions, str) else None
        self.server_info = result.serverInfo if result.serverInfo is not UNSET else None
        await self.transport.notify(
            "notifications/initialized", UNSET, headers=self._headers("notifications/initialized")
        )

    def _set_transport_era(self, era: mcp.Era) -> None:
        # Either way a session id from an earlier answer (or the probe's) is dropped.
        if hasattr(self.transport, "era"):
            self.transport.era = era
        if hasattr(self.transport, "reset_session"):
            self.transport.reset_session()

    # -- requests --

    def _meta(
        self, version: str, capabilities: Mapping[str, Any], extra: Mapping[str, Any] | None = None
    ) -> mcp.Meta:
        base = (
            {k: v for k, v in extra.items() if not k.startswith(_RESERVED_META_PREFIX)}
            if extra
            else None
        )
        return mcp.request_meta(version, dict(capabilities), CLIENT_INFO, base)

    def _headers(self, method: str, name: str | None = None) -> dict[str, str] | None:
        if not self.http:
            return None
        if self.era == "modern":
            return mcp_headers.request_headers(self.version, method, name)
        return {mcp_headers.PROTOCOL_VERSION: self.version} if self.version else None

    async def request(
        self,
        method: str,
        params: Any,
        *,
        name: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        cancellable: bool = True,
    ) -> Raw:
        headers = self._headers(method, name)
        if extra_headers:
            headers = {**(headers or {}), **extra_headers}
        try:
            return await self.transport.request(
                method, params, headers=headers, cancellable=cancellable
            )
        except SessionExpired:
            # The server forgot our legacy session before handling this request, so
            # sending it again after a new handshake cannot run it twice.
            logger.info(
                "%s: session expired, initializing again", self.alias, extra=log_extra(self.alias)
            )
            await self._initialize()
            return await self.transport.request(
                method, params, headers=self._headers(method, name), cancellable=cancellable
            )

    async def list_tools(self) -> ListResult:
        tools: list[mcp.Tool] = []
        dropped: list[str] = []
        seen: set[str] = set()
        cursor: str | None = None
        ttl = 0
        scope: str | None = None
        for page_no in range(self.max_pages):
            raw = await self.request("tools/list", self._list_params(cursor))
            try:
                page = rpc.decode_as(raw, mcp.ListToolsPage)
            except rpc.InvalidParams as exc:
                raise ProtocolViolation(f"{self.alias}: bad tools/list result: {exc}") from None
            if page_no == 0:
                if isinstance(page.ttlMs, int):
                    ttl = max(page.ttlMs, 0)
                scope = page.cacheScope if isinstance(page.cacheScope, str) else None
            if self.server_info is None and isinstance(page.meta, dict):
                # A server may say who it is in any result's _meta (not only discover's).
                self.server_info = page.meta.get(mcp.KEY_SERVER_INFO)
            for item in page.tools:
                tool = self._accept_tool(item, dropped)
                if tool is not None:
                    tools.append(tool)
            nxt = page.nextCursor
            if not isinstance(nxt, str):
                return ListResult(tools, ttl, dropped, scope)
            if nxt in seen:
                raise ProtocolViolation(f"{self.alias}: tools/list cursor {nxt!r} repeated")
            seen.add(nxt)
            cursor = nxt
        raise ProtocolViolation(
            f"{self.alias}: tools/list did not end after {self.max_pages} pages"
        )

    def _list_params(self, cursor: str | None) -> Any:
        meta = self._meta(self.version, NO_CAPABILITIES) if self.era == "modern" else UNSET
        if cursor is None and meta is UNSET:
            return UNSET
        return mcp.ListToolsParams(cursor=UNSET if cursor is None else cursor, meta=meta)

    def _accept_tool(self, item: Raw, dropped: list[str]) -> mcp.Tool | None:
        try:
            tool = rpc.decode_as(item, mcp.Tool)
        except rpc.InvalidParams as exc:
            logger.warning(
                "%s: skipped a malformed tool: %s",
                self.alias,
                exc,
                extra=log_extra(self.alias, reason=str(exc)),
            )
            dropped.append(f"(malformed): {exc}")
            return None
        if self.http:
            try:
                mapping = mcp_headers.header_params(tool.inputSchema)
            except mcp_headers.InvalidHeaderAnnotation as exc:
                logger.warning(
                    "%s: dropped tool %r: %s",
                    self.alias,
                    tool.name,
                    exc.reason,
                    extra=log_extra(self.alias, reason=exc.reason),
                )
                dropped.append(f"{tool.name}: {exc.reason}")
                return None
            if mapping:
                self._param_headers[tool.name] = mapping
            else:
                self._param_headers.pop(tool.name, None)
        return tool

    async def call_tool(
        self,
        params: mcp.CallToolParams,
        *,
        capabilities: Mapping[str, Any] | None = None,
        arguments: Any = None,
    ) -> Raw:
        """Send tools/call with ``params.name`` already the server's own tool name.

        ``arguments`` is the decoded arguments when the caller already has them; they
        are only needed to mirror ``x-mcp-header`` values into headers.
        """
        extra = self._prepare_call(params, capabilities, arguments)
        return await self.request("tools/call", params, name=params.name, extra_headers=extra)

    def call_tool_nowait(
        self,
        params: mcp.CallToolParams,
        capabilities: Mapping[str, Any] | None,
        reply: Callable[[Raw | None, Exception | None], None],
    ) -> rpc.Id | None:
        """Send tools/call and return its id, with ``reply`` called on the answer; or
        None when this transport only offers the awaitable ``call_tool``."""
        send = getattr(self.transport, "request_nowait", None)
        if send is None or self.http:
            return None
        self._prepare_call(params, capabilities, None)
        rid: rpc.Id = send("tools/call", params, reply)
        return rid

    def _prepare_call(
        self, params: mcp.CallToolParams, capabilities: Mapping[str, Any] | None, arguments: Any
    ) -> dict[str, str] | None:
        """Set the era's ``_meta`` on params; the Mcp-Param-* headers, if any."""
        agent_meta = params.meta if isinstance(params.meta, dict) else None
        if self.era == "modern":
            params.meta = self._call_meta(capabilities, agent_meta)
        elif agent_meta:
            kept = {k: v for k, v in agent_meta.items() if not k.startswith(_RESERVED_META_PREFIX)}
            params.meta = kept if kept else UNSET
        mapping = self._param_headers.get(params.name) if self.era == "modern" else None
        if not mapping:
            return None
        if arguments is None and isinstance(params.arguments, Raw):
            try:
                arguments = msgspec.json.decode(params.arguments)
            except msgspec.DecodeError:
                arguments = None
        try:
            return mcp_headers.param_headers(
                mapping, arguments if isinstance(arguments, dict) else None
            )
        except mcp_headers.HeaderValueError as exc:
            raise rpc.RPCError(rpc.INVALID_PARAMS, str(exc)) from None

    def _call_meta(
        self, capabilities: Mapping[str, Any] | None, agent_meta: Mapping[str, Any] | None
    ) -> mcp.Meta:
        if not capabilities and (
            not agent_meta or all(k.startswith(_RESERVED_META_PREFIX) for k in agent_meta)
        ):
            # The common call carries nothing of the agent's own: one shared _meta
            # (encoded, never changed) instead of a new dict per call.
            if self._plain_meta is None:
                self._plain_meta = self._meta(self.version, NO_CAPABILITIES)
            return self._plain_meta
        return self._meta(self.version, capabilities or NO_CAPABILITIES, agent_meta)

    def params_meta(
        self, capabilities: Mapping[str, Any] | None, agent_meta: Mapping[str, Any] | None
    ) -> mcp.Meta | UnsetType:
        """The ``_meta`` for a request of an agent's: the envelope (modern) or the agent's
        own keys without the reserved ones (legacy)."""
        if self.era == "modern":
            return self._call_meta(capabilities, agent_meta)
        if agent_meta:
            kept = {k: v for k, v in agent_meta.items() if not k.startswith(_RESERVED_META_PREFIX)}
            return kept if kept else UNSET
        return UNSET

    async def listen_for(self, notifications: Mapping[str, Any]) -> None:
        """``listen_tools`` for any set of notifications (lists, resources, tasks)."""
        params = {
            "_meta": self._meta(self.version, NO_CAPABILITIES),
            "notifications": dict(notifications),
        }
        await self.request("subscriptions/listen", params)

    @property
    def lists_changes(self) -> bool:
        """Whether the server says it can notify us when its tool list changes."""
        tools = self.capabilities.get("tools")
        return isinstance(tools, dict) and tools.get("listChanged") is True

    async def listen_tools(self) -> None:
        """Hold a modern ``subscriptions/listen`` for tool-list changes open until the
        server ends it (returns), cancels it (ServerCancelled) or the stream drops."""
        params = {
            "_meta": self._meta(self.version, NO_CAPABILITIES),
            "notifications": {"toolsListChanged": True},
        }
        await self.request("subscriptions/listen", params)

    async def probe(self) -> None:
        """A cheap request that proves the server answers (for half-open breakers)."""
        if self.era == "modern":
            params = mcp.MetaOnlyParams(meta=self._meta(self.version, NO_CAPABILITIES))
            await self.request("server/discover", params, cancellable=False)
        else:
            await self.request("tools/list", UNSET)


def _pick_modern(versions: list[Any]) -> str | None:
    for v in mcp.MODERN_VERSIONS:
        if v in versions:
            return v
    return None
