"""The HTTP+SSE transport's parts that do no I/O: what the stream's events and the
server's replies mean.

``event_message`` turns one ``message`` event into a JSON-RPC message, compacting
JSON that came over several ``data:`` lines first, and warns (within the server's
budget) about one that holds none. A response that cannot be taken fails the request
it answered instead, as a stdio server's line does. ``endpoint_target`` and
``stream_redirect_target`` keep messages and the stream on the configured origin.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final
from urllib.parse import urljoin

from protocol.http.parts import (
    Origin,
    ResponseHead,
    error_in,
    parse_url,
    same_origin,
    sendable_target,
)
from protocol.http.sse import SSEEvent
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.refused_replies import refuse_each
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote

from ..complaints import Complain
from ..errors import InvalidResponse, TransportError, UnexpectedReply
from ..http.reply import SNIPPET, content_type_words, decode_reply, status_error

logger = logging.getLogger("mcpd.sse")

# How much of an event that is not JSON-RPC a warning quotes.
_SHOWN: Final = 200
REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})


def event_message(
    event: SSEEvent, label: str, complain: Complain, refuse: Callable[[object, str], bool]
) -> rpc.Message | None:
    """The JSON-RPC message in a ``message`` event; None if it has none, and a warning
    if ``complain`` lets one through (a server can send such events without pause).
    A response that cannot be taken goes to ``refuse`` (each id it names as given, what
    is wrong with it), which says whether it failed a waiting request; if none did, it
    is warned about as any other."""
    try:
        # Data over several lines (pretty-printed JSON) is made one line by the decoder.
        return decode_reply(event.data, 200, label, "event stream")
    except TransportError as exc:
        if isinstance(exc, InvalidResponse) and refuse_each(exc.given, exc.why, refuse):
            return None
        note = complain()
        if note is not None:
            logger.warning(
                "%s: skipped an event that is not JSON-RPC (%s): %s%s",
                label,
                exc.reason.removeprefix(f"{label}: "),
                quote(event.data.decode("utf-8", "replace"), _SHOWN),
                note,
                extra=log_extra(label, "bad_stream_event"),
            )
        return None


def endpoint_target(label: str, stream_url: str, origin: Origin, data: bytes) -> str:
    """The request target messages go to, from an ``endpoint`` event's data."""
    named = data.decode("utf-8", "replace").strip()
    try:
        parse_url(urljoin(stream_url, named))
    except ValueError as exc:
        raise UnexpectedReply(f"{label}: the endpoint event is not a usable URL: {exc}") from None
    target = same_origin(origin, parse_url(stream_url)[1], named)
    if target is None:
        # The configured headers carry credentials; they stay with their origin.
        raise UnexpectedReply(
            f"{label}: refused the endpoint {quote(named)}: it is not on the event stream's "
            f"origin {origin}"
        )
    if not sendable_target(target):
        raise UnexpectedReply(
            f"{label}: refused the endpoint {quote(named)}: its path is not visible ASCII"
        )
    return target


def stream_redirect_target(label: str, origin: Origin, target: str, head: ResponseHead) -> str:
    """Where a redirect of the stream's GET leads, if that stays on the origin."""
    location = head.get("location")
    new = same_origin(origin, target, location) if location else None
    if new is not None and sendable_target(new):
        return new
    raise UnexpectedReply(
        f"{label}: refused an HTTP {head.status} redirect of the event stream"
        + (f" to {quote(location)}" if location else " without a Location"),
        status=head.status,
    )


def stream_refused(
    label: str, head: ResponseHead, body: bytes, peer: str | None = None
) -> TransportError:
    """Why a GET opened no event stream (answered from the address ``peer``)."""
    if 200 <= head.status < 300:
        return UnexpectedReply(
            f"{label}: GET answered HTTP {head.status} with "
            f"{content_type_words(head)}, not an event stream",
            status=head.status,
            body=body[:SNIPPET],
        )
    exc = status_error(label, head, body, "GET", had_session=False, now=time.time(), peer=peer)
    if isinstance(exc, TransportError):
        return exc
    return UnexpectedReply(
        f"{label}: HTTP {head.status} to GET: {quote(str(exc))}",
        status=head.status,
        body=body[:SNIPPET],
    )


def session_gone(head: ResponseHead, body: bytes) -> bool:
    """Whether a refused POST says the server no longer knows the stream's session."""
    if head.status == 404:
        return True
    # Servers that route messages by a session id in the query answer an unknown or
    # malformed one with 400 and a line of text ("Invalid session ID", "No transport
    # found for sessionId") or a JSON-RPC error saying as much.
    if head.status != 400:
        return False
    error = error_in(body)
    text = error.message if error is not None else body.decode("utf-8", "replace")
    return "session" in text.lower()


def encoded(headers: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(name.encode(), value.encode()) for name, value in headers]
