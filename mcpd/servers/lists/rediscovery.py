"""A 2026-07-28 server's ``server/discover`` answer kept while it is fresh, and asked
for again once its ttl has passed, before its capabilities are relied on once more.

What the session relies on a server's capabilities for is fetching its lists (whether
it offers prompts or resources at all): so the answer is asked for again when a list
is about to be fetched and the answer has gone stale, not on a timer. Its ttl is the
server's to set, but it is taken as ``FLOOR`` at least. Capabilities say what a server
is, which changes when it is deployed again, not from one request to the next; a
server answering ttl 0 would otherwise have mcpd ask before every list it fetches.
With the floor, a server costs one more round trip a minute at most, and a change of
its capabilities is acted on within a minute of the next list that is fetched.

Changed capabilities are adopted in the session: every list is fetched again under
them (a kind of list no longer offered is no longer listed), and the subscription asks
for what they offer. Changed instructions are judged against their pin as they are
when the server is started again (held until approved, by default), and what the
server says it is replaces what ``mcpd status`` showed. A server that no longer speaks
the version the session began with ends the session, so the next one greets it afresh.

A server that answers a request saying it does not speak the version the request was
made for (-32022) is asked at once, whatever the ttl (``doubted``): its answer no
longer listing that version, or failing, ends the session likewise, so that mcpd
learns the server's era again rather than failing every call made for it. So does
an answer only a legacy server gives (``era_signs``): the server changed eras.
"""

from __future__ import annotations

import logging
import math
from typing import Final

import trio

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply
from protocol.mcp import core as mcp
from protocol.mcp import greeting
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote
from transports.errors import TransportError

from ...registry.gating.gate import ListGate
from ..connected.era_signs import legacy_refusal
from ..connected.handshake import NO_CAPABILITIES, client_meta, guarded, identity, kept_instructions
from ..connected.upstream import Upstream

logger = logging.getLogger("mcpd.server")

FLOOR: Final = 60.0  # seconds; see the module's docstring


class Rediscovery:
    """When the connected server's discover answer goes stale, and asking again."""

    def __init__(self, alias: str, gate: ListGate) -> None:
        """``gate``: where the server's instructions are judged against their pin."""
        self.alias = alias
        self._gate = gate
        self._stale_at = math.inf  # no session yet: nothing to ask again
        # The server refused a request as made for a version it does not speak.
        self.doubted = False

    def connected(self, up: Upstream) -> None:
        """A session began with ``up``'s greeting."""
        self._fresh_for(up.discover_ttl_ms)
        # Its era was learned just now: what an earlier session was refused is old news.
        self.doubted = False

    def _fresh_for(self, ttl_ms: int) -> None:
        # In milliseconds first: a server's ttl may be an integer too large for a float.
        self._stale_at = trio.current_time() + max(min(ttl_ms, 2**53) / 1000, FLOOR)

    def due(self, up: Upstream) -> bool:
        """Whether ``up``'s capabilities are to be asked for again before relying on
        them."""
        return up.era == "modern" and trio.current_time() >= self._stale_at

    async def renew(self, up: Upstream) -> bool:
        """Ask ``up`` for its discover answer again and adopt it; whether its
        capabilities changed. An answer mcpd cannot read keeps what the server said
        before, unless the server was ``doubted``; one that no longer lists the
        session's version, or lists more than mcpd reads, ends the session
        (TransportError). A legacy server has no answer to ask for."""
        doubted, self.doubted = self.doubted, False
        if up.era != "modern":
            return False
        params = mcp.MetaOnlyParams(meta=client_meta(up.version, NO_CAPABILITIES))
        try:
            raw = await up.request("server/discover", params)
            found = rpc.decode_as(raw, greeting.Discovered)
        except (rpc.RPCError, rpc.InvalidParams, MalformedReply) as exc:
            legacy = legacy_refusal(exc) if isinstance(exc, rpc.RPCError) else None
            if legacy is not None:
                raise TransportError(
                    f"{self.alias}: {legacy}, as a server of the legacy era answers; "
                    "greeting it again"
                ) from None
            if doubted:
                raise TransportError(
                    f"{self.alias}: it said it does not speak {up.version}, and "
                    f"server/discover asked again failed ({quote(str(exc))}); greeting it again"
                ) from None
            self._fresh_for(0)
            logger.warning(
                "%s: server/discover asked again failed (%s); the capabilities it declared "
                "before are kept",
                self.alias,
                quote(str(exc)),
                extra=log_extra(self.alias, reason="server/discover failed"),
            )
            return False
        unread = greeting.versions_unread(found.supportedVersions)
        if unread is not None:
            raise TransportError(
                f"{self.alias}: server/discover asked again: {unread}; greeting it again"
            )
        if up.version not in greeting.supported_versions(found.supportedVersions):
            raise TransportError(
                f"{self.alias}: server/discover no longer lists {up.version}, the version "
                "this session speaks; greeting it again"
            )
        if doubted:
            logger.warning(
                "%s: it said it does not speak %s, yet its server/discover still lists it; "
                "the session goes on",
                self.alias,
                up.version,
                extra=log_extra(self.alias, reason="version refused"),
            )
        ttl, _ = mcp.ttl_of(found.ttlMs)
        up.discover_ttl_ms = ttl
        self._fresh_for(ttl)
        self._heard(up, found)
        now = greeting.server_capabilities(found.capabilities)
        if now == up.capabilities:
            return False
        logger.info(
            "%s: its capabilities changed since it was last asked; its lists are fetched "
            "again under them",
            self.alias,
            extra=log_extra(self.alias),
        )
        up.capabilities = now
        return True

    def _heard(self, up: Upstream, found: greeting.Discovered) -> None:
        """What the server says of itself now: for ``mcpd status`` (kept when it says
        nothing, as a tools/list page may have said it), and for models."""
        info = identity(greeting.server_info(found.meta))
        if info is not None:
            up.server_info = guarded(info, up.guard, self.alias)
        said = found.instructions if isinstance(found.instructions, str) else None
        if said == up.instructions_given:
            return  # judged already, and a cut said once
        up.instructions_given = said
        up.instructions, up.instructions_cut = kept_instructions(
            self.alias, said, up.guard, up.limits.instructions_bytes
        )
        # Judged now, as at a restart: a change is held (by default), said in the
        # journal and shown waiting, before any agent asks for the instructions.
        self._gate.instructions(self.alias, up.instructions)
