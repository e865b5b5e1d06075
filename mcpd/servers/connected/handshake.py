"""Opening a session with an MCP server: which era it speaks, and that era's handshake.

A modern server answers ``server/discover``; anything else gets the legacy
``initialize``. The outcome is a ``Greeting``, what the server said of itself, for
the ``Upstream`` to adopt; the handshake keeps no session state of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

import msgspec
import trio
from msgspec import Raw

from protocol.http import mcp_headers
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import greeting
from protocol.mcp.greeting import ServerCapabilities
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote
from transports.base import Transport, unsupported
from transports.errors import HttpRPCError, TransportError, UnexpectedReply

from ... import __version__
from ...config.tables.model import Limit
from ...policy.redaction.guard import SecretGuard
from ...registry.gating.limits import limited_instructions
from ...registry.text.clean import clean_text
from ...server_row import ServerInfo

logger = logging.getLogger("mcpd.upstream")

CLIENT_INFO: Final = mcp.Implementation(name="mcpd", version=__version__)
# A daemon has no UI to answer elicitation or sampling, so by default it declares none.
NO_CAPABILITIES: Final[rpc.JsonObject] = {}
RESERVED_META_PREFIX: Final = mcp.RESERVED_META_PREFIX


class ProtocolViolation(TransportError):
    """The server is up but breaks the protocol badly enough that it cannot be used."""


class BadPage(ProtocolViolation):
    """A page of a list that breaks the protocol (no list, a cursor given twice, pages
    without end, too many values to read). Connecting, it is a violation as any other:
    there is no list yet. Fetched again, what the server listed before stays
    (``answer_wait.LIST_FAILURES``)."""


class Incompatible(TransportError):
    """The server speaks no protocol version mcpd does."""


# What a server says of itself is shown in status, each string at most this long.
IDENTITY_CHARS: Final = 256
# A greeting longer than this is worth a line in the journal: of what a server says of
# itself only what mcpd acts on is kept (``protocol.mcp.greeting``), the rest goes unread.
GREETING_TOLD: Final = 64 * 1024


def identity(info: object) -> ServerInfo | None:
    """What ``info`` (``serverInfo``, or a ``_meta``'s) says of the server, each string
    cleaned as a description is, on one line and cut short: a server's name is not
    its to make megabytes of, in every status reply."""
    if isinstance(info, mcp.Implementation):
        said: dict[str, object] = {"name": info.name, "version": info.version}
        said["title"] = info.title
    elif isinstance(info, dict):
        said = {key: info.get(key) for key in ("name", "version", "title")}
    else:
        return None
    kept = {key: _one_line(value) for key, value in said.items() if isinstance(value, str)}
    return ServerInfo(**kept) if kept else None


def guarded(info: ServerInfo | None, guard: SecretGuard, alias: str) -> ServerInfo | None:
    """What the server says it is, shown in ``mcpd status``: guarded as its text is."""
    if info is None:
        return None
    raw = Raw(msgspec.json.encode(info))
    masked = guard.raw(alias, raw, "its name")
    return info if masked is raw else msgspec.json.decode(masked, type=ServerInfo)


def kept_instructions(
    alias: str, text: str | None, guard: SecretGuard, limit: Limit
) -> tuple[str | None, str]:
    """The server's instructions as mcpd keeps them, guarded as its text is and cut to
    ``limit``, and what was cut ("" if nothing)."""
    if text is not None:
        text = guard.text(alias, text, "its instructions")
    return limited_instructions(alias, text, limit)


def _one_line(text: str) -> str:
    # Cut first: cleaning and splitting need not see more than is kept.
    text = " ".join(clean_text(text[: IDENTITY_CHARS * 4])[0].split())
    return text if len(text) <= IDENTITY_CHARS else text[: IDENTITY_CHARS - 3] + "..."


class Greeting(msgspec.Struct):
    era: mcp.Era
    version: str
    capabilities: ServerCapabilities
    instructions: str | None
    server_info: ServerInfo | None
    # Only a modern server's discover result carries one.
    discover_ttl_ms: int | None = None


def client_meta(
    version: str, capabilities: Mapping[str, rpc.Json], extra: Mapping[str, object] | None = None
) -> mcp.Meta:
    """A request's ``_meta`` as mcpd, the servers' client, sends it: the modern
    envelope, with the agent's ``extra`` keys except the reserved ones (mcpd's to set)."""
    base = (
        {k: v for k, v in extra.items() if not k.startswith(RESERVED_META_PREFIX)}
        if extra
        else None
    )
    return mcp.request_meta(version, dict(capabilities), CLIENT_INFO, base)


class Handshake:
    def __init__(
        self,
        alias: str,
        transport: Transport,
        *,
        http: bool,
        era: str,
        probe_timeout: float,
    ) -> None:
        self.alias = alias
        self.transport = transport
        self.http = http
        self.era_pref = era
        self.probe_timeout = probe_timeout
        self.probe_died = False
        self.probe_timed_out = False
        # What was wrong with a discover answer mcpd could not read (None: nothing).
        self.probe_malformed: str | None = None

    async def connect(self, client_capabilities: rpc.JsonObject) -> Greeting:
        """Find out which era the server speaks and greet it in that era."""
        self.probe_timed_out = False
        self.probe_malformed = None
        if self.era_pref != "legacy":
            version = mcp.LATEST_MODERN
            unread: str | None = None  # why the versions a discover result lists went unread
            for _ in range(2):  # at most one retry, with a version from -32022's list
                outcome = await self._probe(version)
                if isinstance(outcome, greeting.Discovered):
                    chosen = _pick_modern(greeting.supported_versions(outcome.supportedVersions))
                    if chosen is not None:
                        return self._discovered(outcome, chosen)
                    unread = greeting.versions_unread(outcome.supportedVersions)
                    break  # a discover result that lists no modern version: legacy
                if outcome is None:
                    break
                version = outcome
            if self.era_pref == "modern":
                if self.probe_timed_out:
                    # Silence says nothing of its era: a server slow to start (a
                    # busy machine, a heavy runtime) is not one that speaks another.
                    raise Incompatible(
                        f"{self.alias}: no answer to server/discover within "
                        f"{self.probe_timeout:g} s (the daemon's probe_timeout)"
                    )
                if unread is not None:
                    # Whether it speaks the version is not known: not that it does not.
                    raise Incompatible(f"{self.alias}: server/discover: {unread}")
                if self.probe_malformed is not None:
                    raise Incompatible(f"{self.alias}: {self.probe_malformed}")
                raise Incompatible(f"{self.alias}: does not speak protocol {mcp.LATEST_MODERN}")
            if unread is not None:
                logger.warning(
                    "%s: server/discover: %s; trying the legacy handshake",
                    self.alias,
                    unread,
                    extra=log_extra(self.alias, reason=unread),
                )
        return await self.initialize(client_capabilities)

    async def _probe(self, version: str) -> greeting.Discovered | str | None:
        """A DiscoverResult, a version to retry with, or None for "legacy"."""
        params = mcp.MetaOnlyParams(meta=client_meta(version, NO_CAPABILITIES))
        headers = mcp_headers.request_headers(version, "server/discover") if self.http else None
        try:
            with trio.fail_after(self.probe_timeout):
                raw = await self.transport.request(
                    "server/discover", params, headers=headers, cancellable=False
                )
        except trio.TooSlowError:
            self.probe_timed_out = True
            logger.info(
                "%s: no answer to server/discover, trying the legacy handshake",
                self.alias,
                extra=log_extra(self.alias),
            )
            return None
        except rpc.RPCError as exc:
            return self._probe_error(exc)
        except UnexpectedReply:
            return None  # an empty or non-JSON-RPC 4xx: a legacy HTTP server
        except TransportError:
            # Some legacy stdio servers exit on any message before initialize; the
            # supervisor then starts the next process straight at the legacy handshake.
            self.probe_died = not self.http
            raise
        try:
            found = rpc.decode_as(raw, greeting.Discovered)
        except rpc.InvalidParams as exc:
            # Taken for legacy, as a server that knows no server/discover may answer
            # anything; but said, and said again if initialize fails too.
            self.probe_malformed = f"its server/discover answer was malformed ({exc})"
            if self.era_pref != "modern":
                logger.warning(
                    "%s: %s; trying the legacy handshake",
                    self.alias,
                    self.probe_malformed,
                    extra=log_extra(self.alias, reason=self.probe_malformed),
                )
            return None
        self._told("server/discover", raw)
        return found

    def _probe_error(self, exc: rpc.RPCError) -> str | None:
        if exc.code == rpc.UNSUPPORTED_PROTOCOL_VERSION:
            # Modern evidence: retry (once) even with the version just sent, rather
            # than fall back to initialize.
            return _pick_modern(_supported(exc))
        status = exc.http_status if isinstance(exc, HttpRPCError) else None
        if self.http and (
            exc.code in rpc.MODERN_ERROR_CODES
            or (status == 404 and exc.code == rpc.METHOD_NOT_FOUND)
        ):
            # Modern evidence without a usable discover answer: a modern server that
            # rejects something about the probe.
            raise ProtocolViolation(
                f"{self.alias}: server/discover failed with the error {quote(exc.message)}"
            )
        return None

    def _discovered(self, result: greeting.Discovered, version: str) -> Greeting:
        self._set_transport_era("modern")
        ttl, wrong = mcp.ttl_of(result.ttlMs)
        if wrong is not None:
            logger.warning(
                "%s: server/discover: %s; taken as 0",
                self.alias,
                wrong,
                extra=log_extra(self.alias),
            )
        return Greeting(
            "modern",
            version,
            greeting.server_capabilities(result.capabilities),
            result.instructions if isinstance(result.instructions, str) else None,
            identity(greeting.server_info(result.meta)),
            ttl,
        )

    def _told(self, method: str, raw: Raw) -> None:
        if len(raw) > GREETING_TOLD:
            logger.info(
                "%s: its %s result is %s bytes; mcpd keeps only the parts it acts on",
                self.alias,
                method,
                f"{len(raw):,}",
                extra=log_extra(self.alias),
            )

    async def initialize(self, client_capabilities: rpc.JsonObject) -> Greeting:
        """The legacy handshake (the caller sends ``notifications/initialized`` once it
        has adopted the result), or a modern greeting if the server turns out modern."""
        # A plain dict: the struct omits an empty `capabilities`, which the legacy
        # schema requires (the Python SDK rejects initialize without it).
        params = {
            "protocolVersion": mcp.LATEST_LEGACY,
            "capabilities": client_capabilities,
            "clientInfo": CLIENT_INFO,
        }
        self._set_transport_era("legacy")
        try:
            # initialize must never be cancelled (2025-11-25 lifecycle).
            raw = await self.transport.request("initialize", params, cancellable=False)
        except rpc.RPCError as exc:
            if exc.code == rpc.UNSUPPORTED_PROTOCOL_VERSION and self.era_pref != "legacy":
                # A modern server that was slow to answer the probe; probe again.
                chosen = _pick_modern(_supported(exc))
                if chosen is not None:
                    outcome = await self._probe(chosen)
                    if isinstance(outcome, greeting.Discovered):
                        return self._discovered(outcome, chosen)
            # Taken for legacy only because the probe had no answer in time: the
            # server may be a slow modern one, and the user the one to say so.
            slow = (
                f"no answer to server/discover within {self.probe_timeout:g} s "
                "(the daemon's probe_timeout), and "
                if self.probe_timed_out
                else ""
            )
            if self.probe_malformed is not None:
                slow = f"{self.probe_malformed}, and "
            if exc.code == rpc.METHOD_NOT_FOUND and exc.message == unsupported("initialize"):
                # mcpd's refusal of its own request, read back: what it wrote came back.
                raise Incompatible(
                    f"{self.alias}: the server sent mcpd's initialize request back as its "
                    "own, then mcpd's refusal of it as the answer: it echoes what it reads "
                    "(is it an MCP server?)"
                ) from None
            raise Incompatible(
                f"{self.alias}: {slow}initialize failed with the error {quote(exc.message)}"
            ) from None
        try:
            result = rpc.decode_as(raw, greeting.Initialized)
        except rpc.InvalidParams as exc:
            raise ProtocolViolation(f"{self.alias}: bad initialize result: {exc}") from None
        self._told("initialize", raw)
        if result.protocolVersion not in mcp.LEGACY_VERSIONS:
            raise Incompatible(
                f"{self.alias}: server offered protocol {quote(result.protocolVersion)}; "
                f"mcpd speaks {', '.join(mcp.ALL_VERSIONS)}"
            )
        return Greeting(
            "legacy",
            result.protocolVersion,
            greeting.server_capabilities(result.capabilities),
            result.instructions if isinstance(result.instructions, str) else None,
            identity(result.serverInfo),
        )

    def _set_transport_era(self, era: mcp.Era) -> None:
        # Either way a session id from an earlier answer (or the probe's) is dropped.
        self.transport.era = era
        self.transport.reset_session()


class _Unsupported(msgspec.Struct):
    supported: list[object] = []


def _supported(exc: rpc.RPCError) -> list[object]:
    """The versions an unsupported-version error names (of all its data, only them)."""
    said = exc.data_as(_Unsupported)
    return [] if said is None else said.supported


def _pick_modern(versions: list[Any]) -> str | None:
    for v in mcp.MODERN_VERSIONS:
        if v in versions:
            return v
    return None


def relay_capabilities(kinds: list[str]) -> rpc.JsonObject:
    """The client capabilities mcpd declares to a legacy server for ``servers.X.relay``."""
    caps: rpc.JsonObject = {}
    if "elicitation" in kinds:
        caps["elicitation"] = {"form": {}, "url": {}}
    if "sampling" in kinds:
        caps["sampling"] = {}
    if "roots" in kinds:
        caps["roots"] = {"listChanged": False}
    return caps
