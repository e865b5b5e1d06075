"""Stage one of reading JSON-RPC: what one line is, read from its envelope alone.

Only the envelope is decoded: ``params``/``result`` (and an error's ``data``) stay the
peer's bytes (``msgspec.Raw``), so a request whose params are wrong still has a usable
id and gets its error reply under that id, and the rest of a message is decoded only by
what needs it, as far as it needs it (stage two: ``messages.decode_as``).

A line that is not a usable message fails in JSON-RPC's own terms (``DecodeFailure``),
saying why in words a model or a person can act on; a line whose text alone is at fault
(bytes that are not UTF-8, half a surrogate pair, a byte order mark) is answered under
the id it reads as with its text mended; so is one holding a number that common decoders
do not read (``numbers``), under its own id, a response as one that cannot be taken.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..lines.oneline import line_fault, one_line
from ..lines.textfaults import Fault, invalid_utf8, leading_bom, lone_surrogate
from .messages import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MAX_ID_LENGTH,
    MAX_INT_ID,
    MIN_INT_ID,
    PARSE_ERROR,
    BatchedReplies,
    DecodeFailure,
    ErrorObject,
    ErrorResponse,
    Id,
    MalformedResponse,
    Message,
    Notification,
    ReceivedError,
    Request,
    Response,
    id_out_of_range,
    id_too_long,
    valid_id,
)
from .numbers import number_fault, plain_line


class _Envelope(msgspec.Struct):
    # Loose types on purpose: the checks below give JSON-RPC's own errors, not msgspec's.
    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    params: Raw | UnsetType = UNSET
    result: Raw | UnsetType = UNSET
    error: Raw | UnsetType = UNSET


_envelope_decoder: Final = msgspec.json.Decoder(_Envelope)
_error_decoder: Final = msgspec.json.Decoder(ReceivedError)


def decode_message(data: bytes | memoryview) -> Message:
    """Stage one: classify one JSON text as a request, notification or response.

    Any source may hand it pretty-printed JSON: the message it returns (and the raw
    params or result in it) is always a single line."""
    if isinstance(data, memoryview):
        data = bytes(data)
    fault = invalid_utf8(data)
    if fault is not None:
        raise _unsound(fault, "not valid UTF-8")
    bom = leading_bom(data)
    if bom is not None:
        raise _unsound(bom, "led by a byte order mark")
    try:
        data = one_line(data)
        env = _envelope_decoder.decode(data)
    except msgspec.ValidationError as exc:
        if data.lstrip()[:1] == b"[":
            # The type is checked at the first byte: "[INFO] starting" is no batch.
            raise _not_an_object(data) from None
        raise DecodeFailure(INVALID_REQUEST, f"Invalid request: {exc}") from None
    except RecursionError as exc:
        raise DecodeFailure(PARSE_ERROR, f"Parse error: {exc}", None, "nested too deeply") from None
    except msgspec.DecodeError as exc:
        half = lone_surrogate(data)
        if half is not None:
            raise _unsound(half, "not valid Unicode (a lone UTF-16 surrogate)") from None
        why = "nested too deeply" if "recursion depth" in str(exc) else "not JSON"
        raise DecodeFailure(PARSE_ERROR, f"Parse error: {exc}", None, why) from None
    msg_id = env.id if valid_id(env.id) else None
    if env.method is not UNSET:
        # A request's id is kept while it runs and echoed in its answers: one too long
        # to keep is not echoed either, as one that could not be read is not.
        if type(msg_id) is str and len(msg_id) > MAX_ID_LENGTH:
            raise DecodeFailure(INVALID_REQUEST, id_too_long(len(msg_id)))
        if type(msg_id) is int and not MIN_INT_ID <= msg_id <= MAX_INT_ID:
            raise DecodeFailure(INVALID_REQUEST, id_out_of_range(msg_id))
    if env.jsonrpc != "2.0":
        raise DecodeFailure(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"', msg_id)
    unread = number_fault(data)
    if unread is not None:
        raise _unread_number(env, msg_id, unread)
    params = env.params if isinstance(env.params, Raw) else None
    if env.method is not UNSET:
        if not isinstance(env.method, str):
            raise DecodeFailure(
                INVALID_REQUEST, 'Invalid request: "method" must be a string', msg_id
            )
        if env.id is UNSET:
            return Notification(env.method, params)
        if msg_id is None:
            raise DecodeFailure(INVALID_REQUEST, "Invalid request: id must be a string or integer")
        return Request(msg_id, env.method, params)
    if isinstance(env.error, Raw):
        if isinstance(env.result, Raw):
            # JSON-RPC allows one: taking either would guess at what the peer meant.
            given = None if env.id is UNSET else env.id
            raise MalformedResponse(given, "both a result and an error (JSON-RPC allows one)")
        # An error may carry a null id, or (some servers) none at all.
        if env.id is not None and env.id is not UNSET and msg_id is None:
            raise MalformedResponse(env.id, "bad id")
        try:
            got = _error_decoder.decode(env.error)
        except (msgspec.DecodeError, RecursionError):
            return ErrorResponse(
                msg_id, ErrorObject(INTERNAL_ERROR, "malformed error object from peer")
            )
        return ErrorResponse(msg_id, got.as_object())
    if isinstance(env.result, Raw):
        if msg_id is None:
            raise MalformedResponse(None if env.id is UNSET else env.id, "bad id")
        return Response(msg_id, env.result)
    raise DecodeFailure(INVALID_REQUEST, "Invalid request: no method, result or error", msg_id)


def _not_an_object(data: bytes) -> DecodeFailure:
    """The failure of a line that starts with ``[``: a batch, or not JSON."""
    if line_fault(data) is not None:
        return DecodeFailure(
            PARSE_ERROR, "Parse error: not JSON (text starting with '[')", None, "not JSON"
        )
    # Batches left MCP with 2025-06-18; a 2025-03-26 peer may still send one.
    batch = (
        "Invalid request: a JSON-RPC batch (an array of messages), which is not "
        "taken here; send each message on its own"
    )
    responses = _batched_response_ids(data)
    if responses:
        return BatchedReplies(batch, responses)
    return DecodeFailure(INVALID_REQUEST, batch)


def _unread_number(env: _Envelope, msg_id: Id | None, unread: str) -> DecodeFailure:
    """The failure of a message holding a number no decoder reads (``unread`` says
    which): a response's, that cannot be taken; any other's, a parse error under its
    id."""
    if env.method is UNSET:
        return MalformedResponse(None if env.id is UNSET else env.id, f"holding {unread}")
    rid = msg_id if env.id is not UNSET else None
    return DecodeFailure(PARSE_ERROR, f"Parse error: the message holds {unread}", rid)


_batch_decoder: Final = msgspec.json.Decoder(list[_Envelope])


def _batched_response_ids(data: bytes) -> tuple[object, ...]:
    """The ids of the responses in a batch, as written; none for a batch that cannot be
    read as an array of objects."""
    try:
        batch = _batch_decoder.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return ()
    return tuple(
        env.id
        for env in batch
        if env.method is UNSET
        and env.id is not UNSET
        and (isinstance(env.result, Raw) or isinstance(env.error, Raw))
    )


def _unsound(fault: Fault, why: str) -> DecodeFailure:
    """The failure of a line whose text holds ``fault``: said in words a model can act
    on, under the id of the request the line is when read with its text mended (the id
    is then certain); no id for any other line."""
    readable: Message | None
    try:
        readable = decode_message(fault.mended)
        rid = readable.id if isinstance(readable, Request) else None
    except DecodeFailure as exc:
        readable, rid = exc.readable, exc.id
    return DecodeFailure(
        PARSE_ERROR, f"Parse error: the message holds {fault.what}", rid, why, readable
    )


class _ResultLine(Response, forbid_unknown_fields=True):
    jsonrpc: Literal["2.0"]


_result_line_decoder: Final = msgspec.json.Decoder(_ResultLine)


def decode_response(data: bytes) -> Response | None:
    """A line that is a plain successful response, decoded in one pass; None for any
    other line, which ``decode_message`` then classifies (and says what is wrong with).

    Most of what a server writes is this, and it is checked here as there: ASCII
    (UTF-8 is checked there), on one line, an integer or string id."""
    # A line without the member is not tried: a failed decode costs as much as the
    # general one (a server streaming progress would pay twice for each notification).
    if b'"result"' not in data or not data.isascii():
        return None
    # The raw result is not read by the decoder: a line holding a number no decoder
    # reads is left to ``decode_message`` to refuse.
    if not plain_line(data):
        return None
    try:
        return _result_line_decoder.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None
