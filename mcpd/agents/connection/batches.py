"""JSON-RPC batches on an agent's connection: an array of messages on one line, answered
with one array of their answers.

2025-03-26 lets clients send batches (later revisions dropped them); JSON-RPC says the
answers come back together, in any order, and a batch of notifications gets none. The
connection runs each message as if it had come alone; what is kept here holds each
request's answer back until the last of its batch is in.

A batch is all run at once and its answer written whole, and what its requests answer
is held for as long as any of them runs: so a batch may hold only so many messages, and
a connection that holds answers enough takes no new batch until they are sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

import msgspec

from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc

_ITEMS: Final = msgspec.json.Decoder(list[msgspec.Raw])
# Hosts batch the few requests they send together; a longer batch is refused whole, so
# one line cannot make a burst of work, or an answer, of any size the agent likes.
MAX_MESSAGES: Final = 256


class _Batch:
    __slots__ = ("answers", "size", "waiting")

    def __init__(self, waiting: set[rpc.Id], answers: list[bytes]) -> None:
        self.waiting = waiting
        self.answers = answers
        self.size = sum(map(len, answers))


class Split(msgspec.Struct, frozen=True):
    """A batch taken apart: the requests' ids, the answers already known (errors for
    elements that are not messages, or reuse an id), and the messages to run."""

    ids: list[rpc.Id]
    answers: list[bytes]
    messages: list[bytes]


def split(
    line: bytes,
    in_use: set[rpc.Id] | None = None,
    reused: Callable[[rpc.Request], None] | None = None,
) -> Split | bytes:
    """``line``'s elements, or the one error that answers a line that is no batch at
    all (not JSON, or an empty array) or a batch refused whole (too long). ``reused``
    is told of each request refused for an id in use."""
    try:
        items = _ITEMS.decode(line)
    except (msgspec.DecodeError, RecursionError) as exc:
        return rpc.encode_error(None, rpc.PARSE_ERROR, f"Parse error: {exc}")
    if not items:
        return rpc.encode_error(None, rpc.INVALID_REQUEST, "Invalid request: an empty batch")
    if len(items) > MAX_MESSAGES:
        return rpc.encode_error(
            None,
            rpc.INVALID_REQUEST,
            f"Invalid request: a batch of {len(items)} messages is over the limit of "
            f"{MAX_MESSAGES} messages per batch; none of them was run",
        )
    ids: list[rpc.Id] = []
    answers: list[bytes] = []
    messages: list[bytes] = []
    taken = set(in_use or ())
    for raw in items:
        item = bytes(raw)
        try:
            msg = envelope.decode_message(item)
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
                if reused is not None:
                    reused(msg)
                continue
            taken.add(msg.id)
            ids.append(msg.id)
        messages.append(item)
    return Split(ids, answers, messages)


def messages(line: bytes) -> list[rpc.Message]:
    """The messages of a batch line that can be read (none for a line that is no array,
    or a batch too long to be run): what the bridge counts as asked and as answered."""
    try:
        items = _ITEMS.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return []
    if len(items) > MAX_MESSAGES:
        return []
    out = []
    for raw in items:
        try:
            out.append(envelope.decode_message(bytes(raw)))
        except rpc.DecodeFailure:
            continue
    return out


def joined(answers: list[bytes]) -> bytes:
    return b"[" + b",".join(answers) + b"]"


class Batches(dict[rpc.Id, _Batch]):
    """The requests of a connection's batches still waiting for their answers, by id.
    A dict itself: every answer a connection writes asks whether it is one of these,
    and an empty dict says no without a call."""

    __slots__ = ("held", "max_held")

    def __init__(self, max_held: int) -> None:
        """``max_held``: the bytes of answers held for unfinished batches past which
        a new batch is refused."""
        super().__init__()
        self.held = 0
        self.max_held = max_held

    def start(
        self,
        line: bytes,
        in_use: Iterable[rpc.Id],
        send: Callable[[bytes], None],
        reused: Callable[[rpc.Request], None] | None = None,
    ) -> list[bytes]:
        """Take the batch ``line`` in: its requests wait here for their answers, and
        what can be answered at once and goes alone is sent; the messages to run.
        ``reused`` is told of each request refused for an id in use."""
        if self.held > self.max_held:
            # The batches that hold these may never end (a request that runs for as long
            # as the connection does): refusing more is what keeps the memory bounded.
            send(
                rpc.encode_error(
                    None,
                    rpc.INVALID_REQUEST,
                    f"Invalid request: this connection holds over {self.max_held} bytes "
                    "of answers to batches not yet complete; no batch is run until they "
                    "are sent",
                )
            )
            return []
        parts = split(line, set(in_use), reused)
        if isinstance(parts, bytes):
            send(parts)
            return []
        if parts.ids:
            batch = _Batch(set(parts.ids), list(parts.answers))
            self.held += batch.size
            for rid in parts.ids:
                self[rid] = batch
        elif parts.answers:  # only notifications, and elements that are not messages
            send(joined(parts.answers))
        return parts.messages

    def answer(self, rid: rpc.Id, data: bytes) -> bytes | None:
        """Keep ``data``, the answer to ``rid``; the batch's line once it is complete.
        An answer that would take what is held past the bound is kept as an error
        saying so: one batch of many large answers (lists of a large server) held
        them all until its last."""
        batch = self.pop(rid)
        if self.held + len(data) > self.max_held:
            data = rpc.encode_error(
                rid,
                rpc.INTERNAL_ERROR,
                f"Internal error: an answer of {len(data)} bytes was not kept: this "
                f"connection would hold over {self.max_held} bytes of answers to batches "
                "not yet complete; send this request alone",
            )
        batch.answers.append(data)
        batch.size += len(data)
        self.held += len(data)
        return self._settled(batch, rid)

    def drop(self, rid: rpc.Id) -> bytes | None:
        """``rid`` gets no answer (cancelled): the batch's line if that completes it."""
        batch = self.pop(rid, None)
        return None if batch is None else self._settled(batch, rid)

    def _settled(self, batch: _Batch, rid: rpc.Id) -> bytes | None:
        batch.waiting.discard(rid)
        if batch.waiting:
            return None
        self.held -= batch.size
        return joined(batch.answers) if batch.answers else None
