"""The HTTP+SSE transport's parts that do no I/O: the table of requests waiting for
their responses, and what the stream's events and the server's replies mean.

``Pending`` matches responses to requests by id, drops the late answer to a request
its caller gave up on, and fails every waiting request at once when the transport
dies. ``message_of`` turns one ``message`` event into a JSON-RPC message, compacting
JSON that came over several ``data:`` lines first. ``endpoint_target`` and
``redirect_target`` keep messages and the stream on the configured origin.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Final
from urllib.parse import urljoin

import msgspec
import trio
from msgspec import Raw, UnsetType

from protocol import jsonrpc as rpc
from protocol.mcp import CancelledParams
from protocol.sse import SSEEvent

from ._httpconn import Origin, ResponseHead, check_header, parse_url
from ._httpreply import SNIPPET, decode_reply, error_in, status_error
from .base import ServerCancelled, TransportError, UnexpectedReply, log_extra

logger = logging.getLogger("mcpd.sse")

_ABANDONED_KEPT: Final = 1024  # ids of given-up requests whose late answers are expected
REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
# Headers the transport owns; neither configuration nor callers may set them.
_RESERVED: Final = frozenset(
    {"host", "content-type", "content-length", "transfer-encoding", "connection", "accept"}
)


class Slot:
    """A request awaiting its response on the stream."""

    __slots__ = ("done", "error", "event", "result")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.done = False
        self.result: Raw | None = None
        self.error: Exception | None = None

    def resolve(self, result: Raw | None, error: Exception | None) -> None:
        if not self.done:
            self.done = True
            self.result, self.error = result, error
            self.event.set()


class Pending:
    def __init__(self, label: str) -> None:
        self._label = label
        self._slots: dict[rpc.Id, Slot] = {}
        # Requests given up on: an answer may still come for them and is dropped quietly.
        self._abandoned: dict[rpc.Id, None] = {}

    def __len__(self) -> int:
        return len(self._slots)

    def add(self, rid: rpc.Id) -> Slot:
        slot = self._slots[rid] = Slot()
        return slot

    def remove(self, rid: rpc.Id) -> None:
        del self._slots[rid]

    def abandon(self, rid: rpc.Id) -> None:
        self._abandoned[rid] = None
        if len(self._abandoned) > _ABANDONED_KEPT:
            del self._abandoned[next(iter(self._abandoned))]

    def fail_all(self, error: Exception) -> None:
        for slot in self._slots.values():
            slot.resolve(None, error)

    def route(self, msg: rpc.Response | rpc.ErrorResponse) -> None:
        slot = self._slots.get(msg.id) if msg.id is not None else None
        if slot is not None and not slot.done:
            if isinstance(msg, rpc.Response):
                slot.resolve(msg.result, None)
            else:
                slot.resolve(None, rpc.RPCError.from_object(msg.error))
            return
        if msg.id is not None and msg.id in self._abandoned:
            del self._abandoned[msg.id]  # a second one would be a duplicate, not late
            logger.debug("%s: dropped a late response for id %r", self._label, msg.id)
            return
        said = f" ({msg.error.message})" if isinstance(msg, rpc.ErrorResponse) else ""
        logger.warning(
            "%s: dropped a response for id %r%s: no request with that id is waiting",
            self._label,
            msg.id,
            said,
            extra=log_extra(self._label, "stray_response"),
        )

    def server_cancelled(self, msg: rpc.Notification) -> bool:
        """Whether ``msg`` (notifications/cancelled) ended one of our requests."""
        try:
            params = rpc.decode_as(msg.params, CancelledParams)
        except rpc.InvalidParams:
            return False
        if isinstance(params.requestId, UnsetType):
            return False
        slot = self._slots.get(params.requestId)
        if slot is None or slot.done:
            return False
        reason = params.reason if isinstance(params.reason, str) else "no reason given"
        slot.resolve(None, ServerCancelled(f"{self._label} cancelled the request: {reason}"))
        return True


def message_of(event: SSEEvent, label: str) -> rpc.Message | None:
    """The JSON-RPC message in a ``message`` event; None (and a warning) if it has none."""
    data = event.data
    try:
        if b"\n" in data:
            # Pretty-printed JSON, or data over several lines: one line from here on,
            # with every string inside left exactly as it came.
            data = msgspec.json.format(data, indent=-1)
        return decode_reply(data, 200, label, "event stream")
    except (msgspec.DecodeError, TransportError) as exc:
        reason = exc.reason if isinstance(exc, TransportError) else str(exc)
        logger.warning(
            "%s: skipped an event that is not JSON-RPC (%s): %.200r",
            label,
            reason.removeprefix(f"{label}: "),
            event.data[:SNIPPET],
            extra=log_extra(label, "bad_stream_event"),
        )
        return None


def endpoint_target(label: str, stream_url: str, origin: Origin, data: bytes) -> str:
    """The request target messages go to, from an ``endpoint`` event's data."""
    named = data.decode("utf-8", "replace").strip()
    try:
        where, target = parse_url(urljoin(stream_url, named))
    except ValueError as exc:
        raise UnexpectedReply(f"{label}: the endpoint event is not a usable URL: {exc}") from None
    if where != origin:
        # The configured headers carry credentials; they stay with their origin.
        raise UnexpectedReply(
            f"{label}: refused the endpoint {named!r}: it is not on the event stream's "
            f"origin {origin}"
        )
    return target


def redirect_target(label: str, origin: Origin, target: str, head: ResponseHead) -> str:
    """Where a redirect of the stream's GET leads, if that stays on the origin."""
    location = head.get("location")
    if location:
        with contextlib.suppress(ValueError):
            where, new = parse_url(urljoin(f"{origin}{target}", location))
            if where == origin:
                return new
    # The configured headers carry credentials; they stay with their origin.
    raise UnexpectedReply(
        f"{label}: refused an HTTP {head.status} redirect of the event stream"
        + (f" to {location}" if location else " without a Location"),
        status=head.status,
    )


def stream_refused(label: str, head: ResponseHead, body: bytes) -> TransportError:
    """Why a GET opened no event stream."""
    if 200 <= head.status < 300:
        return UnexpectedReply(
            f"{label}: GET answered HTTP {head.status} with "
            f"{head.media_type or 'no content type'!r}, not an event stream",
            status=head.status,
            body=body[:SNIPPET],
        )
    exc = status_error(label, head, body, "GET", had_session=False, now=time.time())
    if isinstance(exc, TransportError):
        return exc
    return UnexpectedReply(
        f"{label}: HTTP {head.status} to GET: {exc}", status=head.status, body=body[:SNIPPET]
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


def header_list(headers: Mapping[str, str], what: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name, value in headers.items():
        if name.lower() in _RESERVED:
            raise ValueError(f"the {what} header {name} is set by the transport itself")
        check_header(name, value)
        out.append((name, value))
    return out


def encoded(headers: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(name.encode(), value.encode()) for name, value in headers]
