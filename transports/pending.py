"""Requests waiting for their responses, matched by id: the table a transport whose
responses arrive on a stream of their own (stdio, the old HTTP+SSE) keeps.

A request is either awaited (its slot has an event the caller waits on, and the
caller removes it) or answered by a callback (which leaves the table as it is
answered). A response to a request its caller gave up on is dropped quietly; any
other response that matches nothing is the server's mistake and is logged, through
``complain`` so that a flood of them stays a trickle in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import trio
from msgspec import Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.refused_replies import (
    answered,
    misaddressed,
    named_twice,
    refusal,
    refuse_each,
)
from protocol.mcp.core import CancelledParams
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote, quoted_id

from .base import ReplySink
from .errors import ServerCancelled

_ABANDONED_KEPT: Final = 1024  # ids of given-up requests whose late answers are expected


class Slot:
    """A request whose caller awaits its response (``event``)."""

    __slots__ = ("done", "error", "event", "result")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.done = False
        self.result: Raw | None = None
        self.error: Exception | None = None

    def resolve(self, result: Raw | None, error: Exception | None) -> None:
        self.done = True
        self.result, self.error = result, error
        self.event.set()


class PendingRequests:
    """One transport's requests sent and not yet answered, by id."""

    def __init__(
        self,
        label: str,
        logger: logging.Logger,
        complain: Callable[[], str | None] = lambda: "",
        late: Callable[[rpc.Id], None] | None = None,
    ) -> None:
        """``complain`` says whether a stray response may be logged now (None: stay
        quiet) and what to add to the warning; ``late`` hears of each answer to a
        request given up on."""
        self._label = label
        self._late = late
        self._log = logger
        self._complain = complain
        self._slots: dict[rpc.Id, Slot] = {}
        # Requests answered by a callback: kept apart from the slots, so that a call's
        # answer costs one dict pop and no object of its own.
        self._replies: dict[rpc.Id, ReplySink] = {}
        # Requests given up on (timed out or cancelled): an answer may still come for them
        # and is dropped quietly. Any other unmatched response is the server's mistake.
        self._abandoned: dict[rpc.Id, None] = {}

    def __len__(self) -> int:
        return len(self._slots) + len(self._replies)

    def wait(self, rid: rpc.Id) -> Slot:
        """A slot to await; the caller removes it with ``drop`` when done."""
        slot = self._slots[rid] = Slot()
        return slot

    def expect(self, rid: rpc.Id, reply: ReplySink) -> None:
        """``reply`` gets (result, None) or (None, error), once."""
        self._replies[rid] = reply

    def drop(self, rid: rpc.Id) -> None:
        self._slots.pop(rid, None)

    def abandon(self, rid: rpc.Id) -> None:
        """The caller gave up: a late answer is expected and will be dropped."""
        self._abandoned[rid] = None
        if len(self._abandoned) > _ABANDONED_KEPT:
            del self._abandoned[next(iter(self._abandoned))]

    def forget(self, rid: rpc.Id) -> bool:
        """Give up on a callback request; whether it was still waiting."""
        if self._replies.pop(rid, None) is None:
            return False
        self.abandon(rid)
        return True

    def waiting(self, rid: rpc.Id) -> bool:
        """Whether the request ``rid`` waits for its answer."""
        slot = self._slots.get(rid)
        return rid in self._replies or (slot is not None and not slot.done)

    def resolve(self, rid: rpc.Id, result: Raw | None, error: Exception | None) -> bool:
        """Answer the request ``rid`` if it is waiting; whether it was."""
        reply = self._replies.pop(rid, None)
        if reply is not None:
            reply(result, error)
            return True
        slot = self._slots.get(rid)
        if slot is None or slot.done:
            return False
        slot.resolve(result, error)
        return True

    def answer(self, msg: rpc.Response, line: bytes = b"") -> bool:
        """``route`` for a successful response: a call's answer, most of the time."""
        reply = self._replies.pop(msg.id, None)
        if reply is None:
            return self.route(msg, line)
        reply(msg.result, None)
        return True

    def route(self, msg: rpc.Response | rpc.ErrorResponse, line: bytes = b"") -> bool:
        """Hand a response to the request waiting for it; whether one was. ``line``: the
        response as written, read again for another id it gives if it answers none."""
        if msg.id is not None:
            if isinstance(msg, rpc.Response):
                answered = self.resolve(msg.id, msg.result, None)
            else:
                answered = self.resolve(msg.id, None, rpc.RPCError.from_object(msg.error))
            if answered:
                return True
            if msg.id in self._abandoned:
                del self._abandoned[msg.id]  # a second one is not late but a duplicate
                self._log.debug("%s: dropped a late response for id %r", self._label, msg.id)
                if self._late is not None:
                    self._late(msg.id)
                return False
            if isinstance(msg.id, str) and self._fail(misaddressed(msg.id, self.waiting)):
                return False
        twice = named_twice(line) if line else None
        if twice is not None and refuse_each(*twice, self.refuse):
            return False
        # Unknown ids, duplicates: a warning, not debug only, so that the log says which
        # server sent them.
        note = self._complain()
        if note is None:
            return False
        said = f" ({quote(msg.error.message)})" if isinstance(msg, rpc.ErrorResponse) else ""
        self._log.warning(
            "%s: dropped a response for id %s%s: no request with that id is waiting "
            "(unknown id, wrong id type, or a duplicate)%s",
            self._label,
            quoted_id(msg.id),
            said,
            note,
            extra=log_extra(self._label, reason="response to no pending request"),
        )
        return False

    def refuse(self, given: object, why: str) -> bool:
        """Fail at once the request waiting for a response under the id ``given`` that
        cannot be taken (``why``: what is wrong with it; ``protocol.jsonrpc.refused_replies``),
        rather than leave it to wait out its time limit; whether one was waiting."""
        return self._fail(answered(given, why, self.waiting))

    def _fail(self, found: tuple[rpc.Id, str] | None) -> bool:
        if found is None:
            return False
        rid, why = found
        self.resolve(rid, None, refusal(self._label, rid, why, self._log))
        return True

    def server_cancelled(self, msg: rpc.Notification) -> bool:
        """Whether ``msg`` (notifications/cancelled) ended one of our requests."""
        try:
            params = rpc.decode_as(msg.params, CancelledParams)
        except rpc.InvalidParams:
            return False
        if isinstance(params.requestId, UnsetType):
            return False
        reason = quote(params.reason) if isinstance(params.reason, str) else "no reason given"
        error = ServerCancelled(f"{self._label} cancelled the request: {reason}")
        return self.resolve(params.requestId, None, error)

    def fail_all(self, error: Exception) -> None:
        for rid in [*self._replies, *self._slots]:
            self.resolve(rid, None, error)
