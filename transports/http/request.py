"""What a Streamable HTTP request carries: its headers, and the exchange it is part of.

``RequestHeaders`` builds every request's headers from the transport's own, the
configured ones and the caller's, and remembers the protocol version a legacy
session needs on every later message (notifications and DELETE included).
``redirect_target`` decides whether a redirect may be followed: only on the same
origin, because the configured headers carry credentials.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final

import trio

from protocol.http.mcp_headers import PROTOCOL_VERSION, TRANSPORT_HEADERS, is_plain
from protocol.http.parts import Origin, ResponseHead, header_list, same_origin, sendable_target
from protocol.http.sse import ResumePoint
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.shown.logfields import log_extra

from ..errors import SessionExpired, UnexpectedReply

logger = logging.getLogger("mcpd.http")

VERSION_HEADER: Final = "mcp-protocol-version"
# mcpd decodes no content coding, and a request without Accept-Encoding takes any: a
# server or a proxy in front of it would be free to compress its answers.
IDENTITY: Final = ("Accept-Encoding", "identity")


class OutgoingMessage:
    """One message on its way, as the reply readers need to know it."""

    __slots__ = ("_resume", "id", "method", "sent", "session")

    def __init__(self, method: str, id: rpc.Id | None, session: str | None) -> None:
        self.method = method
        self.id = id
        self.session = session  # the Mcp-Session-Id it carried
        self.sent = False
        self._resume: ResumePoint | None = None

    @property
    def resume(self) -> ResumePoint:
        """Where its event streams got to (made for an exchange that has one)."""
        if self._resume is None:
            self._resume = ResumePoint()
        return self._resume

    def __str__(self) -> str:
        return self.method if self.id is None else f"{self.method} (id {self.id})"


# How many sets of request headers are kept encoded (``RequestHeaders.request``).
_KEPT: Final = 256


class RequestHeaders:
    def __init__(self, authority: str, configured: Mapping[str, str]) -> None:
        self._authority = authority
        self._static = header_list(configured, "configured", TRANSPORT_HEADERS)
        # The MCP-Protocol-Version requests carry, for the messages callers send without
        # one (notifications, DELETE): legacy servers check it on every POST of a session.
        self.version: str | None = None
        # A request's headers as ``post`` made them, by the caller's headers, the
        # session and the version; with the version they set.
        self._kept: dict[object, tuple[list[tuple[bytes, bytes]], str | None]] = {}

    def request(
        self, headers: Mapping[str, str] | None, ex: OutgoingMessage
    ) -> list[tuple[bytes, bytes]]:
        """``post`` for a request and its caller's headers, which are checked and
        encoded once for as long as they, the session and the version stay the same:
        a server's calls of one tool carry the same ones."""
        key = (tuple(headers.items()) if headers else (), ex.session, self.version)
        found = self._kept.get(key)
        if found is None:
            out = self.post(header_list(headers or {}, "request", TRANSPORT_HEADERS), ex)
            if len(self._kept) >= _KEPT:
                self._kept.clear()  # headers that vary by call (Mcp-Param) must not pile up
            found = self._kept[key] = (out, self.version)
        else:
            self.version = found[1]
        return found[0]

    def post(self, extra: list[tuple[str, str]], ex: OutgoingMessage) -> list[tuple[bytes, bytes]]:
        given = {name.lower() for name, _ in extra}
        out = [
            ("Host", self._authority),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            IDENTITY,
        ]
        out += [(name, value) for name, value in self._static if name.lower() not in given]
        out += extra
        if VERSION_HEADER not in given:
            if ex.id is None and self.version is not None:
                out.append(("MCP-Protocol-Version", self.version))
        elif ex.id is not None:
            self.version = next(v for k, v in extra if k.lower() == VERSION_HEADER)
        if ex.session is not None:
            out.append(("Mcp-Session-Id", ex.session))
        return [(name.encode(), value.encode()) for name, value in out]

    def stream(self, session: str | None, last_event_id: str | None) -> list[tuple[bytes, bytes]]:
        out = [("Host", self._authority), ("Accept", "text/event-stream"), IDENTITY]
        out += self._static
        if self.version is not None:
            out.append(("MCP-Protocol-Version", self.version))
        if session is not None:
            out.append(("Mcp-Session-Id", session))
        if last_event_id is not None:
            out.append(("Last-Event-ID", last_event_id))
        return [(name.encode(), value.encode()) for name, value in out]


class SessionId:
    """A legacy server's Mcp-Session-Id: taken from the reply that hands it out,
    echoed on every later request, ended with DELETE. 2026-07-28 has no sessions: an
    id a modern server hands out anyway is neither echoed nor ended.

    Once a server has handed out a session, no message goes without one: from the
    moment the server forgets it (``lose``) until a new handshake is done
    (``opened``), every message but the handshake's own is refused before it is
    sent (``for_message``), which its sender takes as the lost session it is."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.value: str | None = None
        # A session the server handed out (``negotiated``) is gone and no handshake
        # has finished since.
        self.lost = False
        self.negotiated = False
        # The server speaks 2026-07-28 (``reset``): no session, and no legacy message.
        self.modern = False
        self._started = trio.Event()

    def capture(self, head: ResponseHead, era: str | None, method: str) -> None:
        """Take the id the reply to ``method`` hands out: only ``initialize``'s does. An
        id another reply carries changes nothing (taken up, it would part the requests
        from the push stream, which stays on the session it opened with)."""
        session = head.get("mcp-session-id")
        if session is None or session == self.value or era == "modern":
            return
        if method != "initialize":
            logger.debug("%s: ignored an Mcp-Session-Id on the reply to %s", self.alias, method)
            return
        # Session ids are visible ASCII only (0x21-0x7E), no spaces at all.
        if not is_plain(session) or " " in session or "\t" in session:
            logger.warning(
                "%s: ignored a malformed Mcp-Session-Id",
                self.alias,
                extra=log_extra(self.alias, "bad_session_id"),
            )
            return
        # The id works like a credential: log that a session began, never the id.
        logger.info(
            "%s: legacy session started", self.alias, extra=log_extra(self.alias, "session_started")
        )
        self.value = session
        self.negotiated = True
        self._started_now()

    def for_message(self, method: str, headers: Mapping[str, str] | None = None) -> str | None:
        """The id a message of ``method`` goes with; SessionExpired, before anything is
        sent, while a lost session has no new one set up (only the handshake goes then),
        or for a message written for a legacy session (its ``headers`` name a legacy
        version) once the server turned out to speak 2026-07-28 instead: its sender
        writes it again for that era."""
        if self.lost and method not in _HANDSHAKE:
            raise SessionExpired(
                f"{self.alias}: the server no longer knows our session, and a new one is "
                f"not set up yet; {method} was not sent"
            )
        said = None if headers is None else headers.get(PROTOCOL_VERSION)
        if self.modern and said in mcp.LEGACY_VERSIONS:
            raise SessionExpired(
                f"{self.alias}: the server now speaks 2026-07-28 and keeps no session; "
                f"{method}, written for its legacy session, was not sent"
            )
        return self.value

    def reset(self, *, sessions: bool) -> None:
        """Forget the id before a new handshake: once the server has handed one out,
        nothing but the handshake goes until it is done, unless the server is now known
        to keep no sessions (``sessions`` False: it speaks 2026-07-28)."""
        self.value = None
        self.negotiated = self.negotiated and sessions
        self.lost = self.negotiated
        self.modern = not sessions

    def lose(self, sent: str | None) -> None:
        """The server refused a message sent with ``sent`` for its session. Only that
        session is gone: a newer one stays."""
        if self.value == sent and (sent is not None or self.negotiated):
            self.value = None
            self.lost = True

    def opened(self) -> None:
        """A handshake is done (``notifications/initialized`` went out): messages go
        again, in the session it began, if the server handed one out."""
        if self.lost:
            self.lost = False
            self._started_now()

    def _started_now(self) -> None:
        self._started.set()
        self._started = trio.Event()

    async def other_than(self, gone: str | None) -> None:
        """Wait until a handshake starts a session other than ``gone``."""
        while self.value in (gone, None) or self.lost:
            await self._started.wait()


# What goes while a lost session is set up again: the handshake that sets it up, and
# the era probe it makes when initialize is refused for a version only modern servers
# speak (a server upgraded across its restart).
_HANDSHAKE: Final = frozenset({"initialize", "notifications/initialized", "server/discover"})


def redirect_target(alias: str, origin: Origin, head: ResponseHead, target: str) -> str:
    """Where a 307/308 to ``target`` points, on the same origin; else UnexpectedReply."""
    location = head.get("location")
    if not location:
        raise UnexpectedReply(
            f"{alias}: HTTP {head.status} redirect without a Location", status=head.status
        )
    new = same_origin(origin, target, location)
    if new is None:
        raise UnexpectedReply(
            f"{alias}: refused an HTTP {head.status} redirect to another origin",
            status=head.status,
        )
    if not sendable_target(new):
        raise UnexpectedReply(
            f"{alias}: refused an HTTP {head.status} redirect to a target that is not "
            "visible ASCII",
            status=head.status,
        )
    # A permanent redirect is followed from now on, so it is worth a line in the log;
    # a temporary one (fastmcp's /mcp/ -> /mcp) would repeat on every request.
    logger.log(
        logging.INFO if head.status == 308 else logging.DEBUG,
        "%s: HTTP %d redirect from %s to %s",
        alias,
        head.status,
        target.split("?", 1)[0],
        new.split("?", 1)[0],
        extra=log_extra(alias, "http_redirect"),
    )
    return new
