"""What a stdio server writes on stdout, cut into lines and each sent where it goes:
responses to the requests waiting for them, notifications to their handler, the
server's own requests to whoever answers them. A byte order mark in front of a line
(Windows-built servers write one at the start of their output) is not part of it.

A line over the limit fails only the request it answered, once its end (and size) is
known; the server goes on. So does a reply that cannot be read (invalid UTF-8, too
deeply nested, not JSON, a number no decoder reads) or taken (sent in a batch, or under
its request's id and another) when the request it answered can still be told: that
request fails at once with the reason. Any other line that is not JSON-RPC is skipped with a
warning; so is a line over the limit that answered no request; a blank line is dropped
unsaid. A server can write those without pause: their warnings are held to its budget
(``complain``), and what reading them cost to its pace (a line over the limit, its bytes
as they are skipped, whichever request it turns out to answer: one that never ends is
paced all the same; a blank line as any line).

No I/O here: the transport feeds the reader what it read (``feed``, ``flush``) and
hands it the requests that wait on its event loop (``WaitingRequests``); the reader decides
where each line goes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, Protocol

from msgspec import Raw

from ..jsonrpc import envelope, unreadable
from ..jsonrpc import messages as rpc
from ..jsonrpc.refused_replies import refuse_each
from ..jsonrpc.reply_faults import (
    MalformedReply,
    MessageTooLarge,
    malformed_reason,
    too_large_reason,
)
from ..jsonrpc.unreadable import id_at_edges
from ..pacing.read_budget import cost, drop_oversized, skipped
from ..shown.logfields import log_extra
from ..shown.visible import quote
from .framing import BOM, LineFramer, Oversized, OversizedEnd, without_bom

logger = logging.getLogger("mcpd.stdio")

# How much of a line that is not JSON-RPC a warning quotes.
_SHOWN: Final = 200
# Of a line over the limit that answers a waiting request, how many times the limit is
# read free of the server's pace (``protocol.pacing.read_budget``), as answers are.
FREE_OVERSIZED: Final = 4


class WaitingRequests(Protocol):
    """The requests waiting for the server's answers, which the reader hands each
    response to: the transport's side, where a request waits on its event loop."""

    def waiting(self, rid: rpc.Id) -> bool:
        """Whether the request ``rid`` waits for its answer."""
        ...

    def answer(self, msg: rpc.Response, line: bytes = b"") -> bool:
        """Hand a successful response to the request waiting for it; whether one was.
        ``line``: the response as written, read again only if it answers none."""
        ...

    def route(self, msg: rpc.Response | rpc.ErrorResponse, line: bytes = b"") -> bool:
        """Hand a response to the request waiting for it; whether one was."""
        ...

    def resolve(self, rid: rpc.Id, result: Raw | None, error: Exception | None) -> bool:
        """End the request ``rid`` with ``result`` or ``error`` if it is waiting; whether
        it was."""
        ...

    def refuse(self, given: object, why: str) -> bool:
        """Fail at once the request a response that cannot be taken answered
        (``jsonrpc.refused_replies``); whether one was waiting."""
        ...

    def server_cancelled(self, msg: rpc.Notification) -> bool:
        """Whether ``msg`` (notifications/cancelled) ended one of the requests."""
        ...


class StdoutReader:
    def __init__(
        self,
        alias: str,
        max_line: int,
        pending: WaitingRequests,
        complain: Callable[[], str | None],
        on_notification: Callable[[rpc.Notification], None] | None,
        on_request: Callable[[rpc.Request], None],
        withdrawn: Callable[[rpc.Notification], bool],
    ) -> None:
        """``complain`` rations the warnings (None: stay quiet); ``withdrawn`` says
        whether a notifications/cancelled stopped one of the server's own requests."""
        self._alias = alias
        self._pending = pending
        self._complain = complain
        self._on_notification = on_notification
        self._on_request = on_request
        self._withdrawn = withdrawn
        self._framer = LineFramer(max_line, report_end=True)
        self._oversized_head = b""
        self._max_line = max_line
        # Of an over-long line whose head names a waiting request: that request, how
        # many more of its bytes are read free of the pace (as an answer's are), and the
        # request once failed before the line ended.
        self._answering: rpc.Id | None = None
        self._free_skip = 0
        self._failed_early: rpc.Id | None = None

    def feed(self, data: bytes) -> float:
        """Hand on the lines ``data`` ends; what those that answered no request waiting
        for them cost to read (``protocol.pacing.read_budget``)."""
        units = 0.0
        for item in self._framer.feed(data):
            if not self._dispatch(item):
                # A line over the limit costs a unit as each of its ends is reported, and
                # its bytes below, as they are skipped.
                units += 1.0 if isinstance(item, Oversized) else cost(item)
        if self._framer.skipped:
            size = self._framer.take_skipped()
            free = min(size, self._free_skip)
            self._free_skip -= free
            if size > free and self._answering is not None:
                # Past what an answer is read free for: its request fails now, not
                # once the rest has gone by at the server's pace.
                rid, self._answering = self._answering, None
                reason = too_large_reason(self._alias, None, self._max_line)
                if self._fail_too_large(rid, reason, None):
                    self._failed_early = rid
            units += skipped(size - free)
        if self._framer.blank:
            # Dropped, not handed on, but read all the same: each costs what a line does.
            lines, size = self._framer.take_blank()
            units += lines + skipped(size)
        return units

    def flush(self) -> None:
        """stdout ended: a last line without its newline still counts."""
        for item in self._framer.flush():
            self._dispatch(item)

    def _dispatch(self, item: bytes | Oversized) -> bool:
        """Whether the line answered a request that waited for it."""
        if isinstance(item, Oversized):
            self._oversized(item)
            return False
        answer = envelope.decode_response(item)
        if answer is not None:  # the common line, in one pass
            return self._pending.answer(answer, item)
        if item.startswith(BOM):  # checked only here: the common line never pays for it
            item = without_bom(item)
            answer = envelope.decode_response(item)
            if answer is not None:
                return self._pending.answer(answer, item)
        try:
            msg = envelope.decode_message(item)
        except rpc.DecodeFailure as exc:
            if exc.unreadable is not None and self._unreadable(item, exc.unreadable):
                return False
            if isinstance(exc, rpc.MalformedResponse) and self._pending.refuse(exc.given, exc.why):
                return False
            if isinstance(exc, rpc.BatchedReplies) and refuse_each(
                exc.given, exc.why, self._pending.refuse
            ):
                return False
            note = self._complain()
            if note is not None:
                logger.warning(
                    "%s: skipped a stdout line that is not JSON-RPC (%s): %s%s",
                    self._alias,
                    exc.message,
                    _quoted(item),
                    note,
                    extra=log_extra(self._alias),
                )
            return False
        if isinstance(msg, rpc.Response | rpc.ErrorResponse):
            return self._pending.route(msg, item)
        elif isinstance(msg, rpc.Notification):
            if msg.method == "notifications/cancelled" and (
                self._pending.server_cancelled(msg) or self._withdrawn(msg)
            ):
                return False
            if drop_oversized(self._alias, msg, self._complain, logger):
                return False
            if self._on_notification is not None:
                try:
                    self._on_notification(msg)
                except Exception:
                    # The server may repeat what made the handler fail, at will.
                    note = self._complain()
                    if note is not None:
                        logger.exception(
                            "%s: notification handler failed on %s%s",
                            self._alias,
                            msg.method,
                            note,
                            extra=log_extra(self._alias, "notification_handler_failed"),
                        )
        else:
            self._on_request(msg)
        return False

    def _unreadable(self, item: bytes, why: str) -> bool:
        """Fail the request a reply that cannot be read answered, if it can be told."""
        rid = unreadable.reply_id(item)
        if rid is None:
            return False
        reason = malformed_reason(self._alias, why)
        if not self._pending.resolve(rid, None, MalformedReply(reason)):
            return False  # a late one, or for nobody: skipped like any other bad line
        logger.warning(
            "%s; the request (id %r) it answered failed, the server keeps running: %s",
            reason,
            rid,
            _quoted(item),
            extra=log_extra(self._alias, "malformed_reply", reason),
        )
        return True

    def _oversized(self, item: Oversized) -> None:
        if not isinstance(item, OversizedEnd):
            self._oversized_head = head = without_bom(item.prefix)
            rid = id_at_edges(head)
            if rid is not None and self._pending.waiting(rid):
                # A real answer a server made too large is skipped at once, up to a
                # bound: past it, such a line is read as any flood is.
                self._answering, self._free_skip = rid, FREE_OVERSIZED * item.limit
            return
        self._answering, self._free_skip = None, 0
        reason = too_large_reason(self._alias, item.size, item.limit)
        rid = id_at_edges(self._oversized_head, item.tail)
        self._oversized_head = b""
        failed_early, self._failed_early = self._failed_early, None
        if rid is not None and rid == failed_early:
            return
        if rid is not None and self._fail_too_large(rid, reason, item):
            return
        # Failing no request, such a line can be sent again and again.
        note = self._complain()
        if note is not None:
            logger.warning(
                "%s; no waiting request could be told which it was%s",
                reason,
                note,
                extra=log_extra(self._alias, "message_too_large", reason),
            )

    def _fail_too_large(self, rid: rpc.Id, reason: str, end: OversizedEnd | None) -> bool:
        """Fail the request ``rid`` waits for with ``reason`` (``end``: its line's end,
        None: before it); whether one did."""
        size = None if end is None else end.size
        answered = self._pending.resolve(
            rid, None, MessageTooLarge(reason, size=size, limit=self._max_line)
        )
        if answered:
            logger.warning(
                "%s; the request (id %r) it answered failed, the server keeps running",
                reason,
                rid,
                extra=log_extra(self._alias, "message_too_large", reason),
            )
        return answered


def _quoted(line: bytes) -> str:
    """The start of a line the server wrote, for a warning (cut where the guard knows)."""
    return quote(line.decode("utf-8", "replace"), _SHOWN)
