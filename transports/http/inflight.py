"""The requests of a Streamable HTTP transport in flight, and what came for them on a
stream not their own: the push stream (legacy), or another request's event stream."""

from __future__ import annotations

import logging

import trio

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.refused_replies import answered, misaddressed, refusal
from protocol.jsonrpc.reply_faults import MalformedReply

logger = logging.getLogger("mcpd.http")


class InFlight:
    """Requests in flight, and what came for them on a stream not their own.

    A response on the push stream, where some servers resume a call's cut stream (even
    before the cut), is kept for the request it answers, which it ends: it is that
    request's answer, and whatever comes for it after is a duplicate. Any other response
    for a request on a stream not its own fails that request at once: one that cannot
    be taken (``refuse``, and ``misaddressed`` for a sound one under an id of the wrong
    type), on any stream; a sound one on another request's stream (``elsewhere``). Each
    request waits within a cancel scope of its own (``expect``), which both cancel;
    ``settled`` then says how it ended."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._inflight: dict[rpc.Id, trio.CancelScope] = {}
        self._kept: dict[rpc.Id, rpc.Response | rpc.ErrorResponse] = {}
        self._refused: dict[rpc.Id, MalformedReply] = {}
        self._answered: set[rpc.Id] = set()

    def expect(self, rid: rpc.Id) -> trio.CancelScope:
        """The scope the request ``rid`` waits in: cancelled when its answer is kept or
        it is refused."""
        scope = self._inflight[rid] = trio.CancelScope()
        return scope

    def drop(self, rid: rpc.Id) -> None:
        self._inflight.pop(rid, None)
        self._kept.pop(rid, None)
        self._refused.pop(rid, None)
        self._answered.discard(rid)

    def answered(self, rid: rpc.Id) -> None:
        """The request ``rid`` has its response from its own stream: nothing on another
        fails it any more."""
        self._answered.add(rid)

    def refuse(self, given: object, why: str) -> bool:
        """Fail at once the request in flight a response under the id ``given`` that
        cannot be taken answered (``why``: what is wrong with it); whether one was."""
        return self._fail(answered(given, why, self._waiting))

    def misaddressed(self, given: object) -> bool:
        """Fail at once the request in flight a sound response under an id of the wrong
        type answered (``"23"`` for 23); whether one was."""
        return self._fail(misaddressed(given, self._waiting))

    def elsewhere(self, given: rpc.Id, carrier: str) -> bool:
        """Whether a sound response under the id ``given``, sent in response to the
        request ``carrier`` names, was for another request in flight; when that one
        waits, it fails at once. A server sends a request's response only in response
        to it (or on the push stream): one that came with another's puts in doubt which
        request it answers, so neither is given it."""
        if given not in self._inflight:
            return self.misaddressed(given)
        if self._waiting(given):
            self._fail((given, f"sent in response to {carrier}"))
        return True

    def _fail(self, found: tuple[rpc.Id, str] | None) -> bool:
        if found is None:
            return False
        rid, why = found
        self._refused[rid] = refusal(self._label, rid, why, logger)
        self._inflight[rid].cancel()
        return True

    def settled(self, rid: rpc.Id) -> rpc.Response | rpc.ErrorResponse:
        """How the request ``rid``, whose scope was cancelled, ended: the response kept
        for it, or (raised) why it failed."""
        kept = self._kept.get(rid)
        if kept is None:
            raise self._refused[rid]
        return kept

    def _waiting(self, rid: rpc.Id) -> bool:
        """Whether the request ``rid`` still waits for its answer: a response kept for it
        is one, so a bad one after it is a duplicate, dropped."""
        return (
            rid in self._inflight
            and rid not in self._refused
            and rid not in self._answered
            and rid not in self._kept
        )

    def keep(self, msg: rpc.Response | rpc.ErrorResponse) -> bool:
        """Whether the response was taken: kept for the request it answers, which then
        waits no more (not if none waits for it, or it has an answer already), or
        failing the one its id of the wrong type was for."""
        if msg.id not in self._inflight:
            return self.misaddressed(msg.id)
        if not self._waiting(msg.id):
            return False
        self._kept[msg.id] = msg
        self._inflight[msg.id].cancel()
        return True

    def kept(self, rid: rpc.Id) -> rpc.Response | rpc.ErrorResponse | None:
        """The response kept for the request ``rid``: its answer, whatever its own
        stream carries after it."""
        return self._kept.get(rid)
