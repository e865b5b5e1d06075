"""JSON-RPC batches on an agent's connection: an array of messages on one line, answered
with one array of their answers.

2025-03-26 lets clients send batches (later revisions dropped them); JSON-RPC says the
answers come back together, in any order, and a batch of notifications gets none. The
connection runs each message as if it had come alone; what is kept here holds each
request's answer back until the last of its batch is in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

import msgspec

from protocol import jsonrpc as rpc

_ITEMS: Final = msgspec.json.Decoder(list[msgspec.Raw])


class _Batch:
    __slots__ = ("answers", "waiting")

    def __init__(self, waiting: set[rpc.Id], answers: list[bytes]) -> None:
        self.waiting = waiting
        self.answers = answers


class Split(msgspec.Struct, frozen=True):
    """A batch taken apart: the requests' ids, the answers already known (errors for
    elements that are not messages, or reuse an id), and the messages to run."""

    ids: list[rpc.Id]
    answers: list[bytes]
    messages: list[bytes]


def split(line: bytes, in_use: set[rpc.Id] | None = None) -> Split | bytes:
    """``line``'s elements, or the one error that answers a line that is no batch at
    all (not JSON, or an empty array)."""
    try:
        items = _ITEMS.decode(line)
    except (msgspec.DecodeError, RecursionError) as exc:
        return rpc.encode_error(None, rpc.PARSE_ERROR, f"Parse error: {exc}")
    if not items:
        return rpc.encode_error(None, rpc.INVALID_REQUEST, "Invalid request: an empty batch")
    ids: list[rpc.Id] = []
    answers: list[bytes] = []
    messages: list[bytes] = []
    taken = set(in_use or ())
    for raw in items:
        item = bytes(raw)
        try:
            msg = rpc.decode_message(item)
        except rpc.DecodeFailure as exc:
            answers.append(exc.reply())
            continue
        if isinstance(msg, rpc.Request):
            if msg.id in taken:
                answers.append(
                    rpc.encode_error(
                        msg.id, rpc.INVALID_REQUEST, f"id {msg.id!r} is already in use"
                    )
                )
                continue
            taken.add(msg.id)
            ids.append(msg.id)
        messages.append(item)
    return Split(ids, answers, messages)


def messages(line: bytes) -> list[rpc.Message]:
    """The messages of a batch line that can be read (none for a line that is no array):
    what the bridge counts as asked and as answered."""
    try:
        items = _ITEMS.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return []
    out = []
    for raw in items:
        try:
            out.append(rpc.decode_message(bytes(raw)))
        except rpc.DecodeFailure:
            continue
    return out


def joined(answers: list[bytes]) -> bytes:
    return b"[" + b",".join(answers) + b"]"


class Batches(dict[rpc.Id, _Batch]):
    """The requests of a connection's batches still waiting for their answers, by id.
    A dict itself: every answer a connection writes asks whether it is one of these,
    and an empty dict says no without a call."""

    __slots__ = ()

    def start(
        self, line: bytes, in_use: Iterable[rpc.Id], send: Callable[[bytes], None]
    ) -> list[bytes]:
        """Take the batch ``line`` in: its requests wait here for their answers, and
        what can be answered at once and goes alone is sent; the messages to run."""
        parts = split(line, set(in_use))
        if isinstance(parts, bytes):
            send(parts)
            return []
        if parts.ids:
            batch = _Batch(set(parts.ids), list(parts.answers))
            for rid in parts.ids:
                self[rid] = batch
        elif parts.answers:  # only notifications, and elements that are not messages
            send(joined(parts.answers))
        return parts.messages

    def answer(self, rid: rpc.Id, data: bytes) -> bytes | None:
        """Keep ``data``, the answer to ``rid``; the batch's line once it is complete."""
        batch = self.pop(rid)
        batch.answers.append(data)
        return self._settled(batch, rid)

    def drop(self, rid: rpc.Id) -> bytes | None:
        """``rid`` gets no answer (cancelled): the batch's line if that completes it."""
        batch = self.pop(rid, None)
        return None if batch is None else self._settled(batch, rid)

    @staticmethod
    def _settled(batch: _Batch, rid: rpc.Id) -> bytes | None:
        batch.waiting.discard(rid)
        if batch.waiting or not batch.answers:
            return None
        return joined(batch.answers)
