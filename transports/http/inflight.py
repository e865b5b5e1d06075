"""The requests of a Streamable HTTP transport in flight, and what came for them on a
stream not their own: the push stream (legacy), or another request's event stream."""

from __future__ import annotations

import logging

import trio

from protocol import jsonrpc as rpc

from ..errors import MalformedReply
from ..refusals import answered, misaddressed, refusal

logger = logging.getLogger("mcpd.http")


class InFlight:
    """Requests in flight, and what came for them on a stream not their own.

    A response on the push stream, where some servers resume a call's cut stream (even
    before the cut), is kept for the request to take: one per request id at most, and
    only while that request is waited for. A response that cannot be taken, there or
    on another request's stream, fails its request at once (``refuse``, and
    ``misaddressed`` for a sound one under an id of the wrong type): each request
    waits within a cancel scope of its own (``expect``), which that cancels."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._inflight: dict[rpc.Id, trio.CancelScope] = {}
        self._kept: dict[rpc.Id, rpc.Response | rpc.ErrorResponse] = {}
        self._refused: dict[rpc.Id, MalformedReply] = {}
        self._answered: set[rpc.Id] = set()

    def expect(self, rid: rpc.Id) -> trio.CancelScope:
        """The scope the request ``rid`` waits in: cancelled when it is refused."""
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

    def _fail(self, found: tuple[rpc.Id, str] | None) -> bool:
        if found is None:
            return False
        rid, why = found
        self._refused[rid] = refusal(self._label, rid, why, logger)
        self._inflight[rid].cancel()
        return True

    def failure(self, rid: rpc.Id) -> MalformedReply:
        """Why the request ``rid``'s scope was cancelled."""
        return self._refused[rid]

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
        """Whether the response was taken: kept for the request it answers (not if none
        waits for it, or one came for it before), or failing the one its id of the wrong
        type was for."""
        if msg.id not in self._inflight:
            return self.misaddressed(msg.id)
        if msg.id in self._kept:
            return False
        self._kept[msg.id] = msg
        return True

    def take(self, rid: rpc.Id) -> rpc.Response | rpc.ErrorResponse | None:
        return self._kept.pop(rid, None)
