"""JSON-RPC 2.0 as MCP uses it: two-stage decoding, encoding, error codes.

Stage one decodes only the envelope and keeps ``params``/``result`` (and an error's
``data``) as ``msgspec.Raw``, so a request whose params are wrong still has a usable id
and gets its error reply under that id, and what a peer put in a message is decoded
only by what needs it, as far as it needs it. Stage two decodes the params (or a
result) into the type the caller asks for, with decoders built once per type.
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import Callable
from typing import Any, Final, Literal, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

from .oneline import line_fault, one_line
from .textfaults import Fault, invalid_utf8, leading_bom, lone_surrogate

# Standard JSON-RPC codes.
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
# MCP codes (2026-07-28); -32020..-32099 are reserved by the spec.
HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

MODERN_ERROR_CODES: Final = frozenset(
    {HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}
)

Id: TypeAlias = int | str
# JSON whose shape is its sender's, read by narrowing. For signatures only: msgspec
# cannot decode into a recursive alias, so a struct's field is typed as msgspec reads it.
Json: TypeAlias = "dict[str, Json] | list[Json] | str | int | float | bool | None"
JsonObject: TypeAlias = dict[str, Json]
T = TypeVar("T")


class ErrorObject(msgspec.Struct, omit_defaults=True):
    """An error as mcpd writes it, or as a peer sent it: then its ``data`` is the
    peer's bytes (``msgspec.Raw``), which may hold millions of values."""

    code: int
    message: str
    data: Any = UNSET


class ReceivedError(msgspec.Struct):
    """An error object as a peer sent it: its ``data`` left as the peer's bytes."""

    code: int
    message: str
    data: Raw | UnsetType = UNSET

    def as_object(self) -> ErrorObject:
        return ErrorObject(self.code, self.message, self.data)


class Request(msgspec.Struct):
    id: Id
    method: str
    params: Raw | None


class Notification(msgspec.Struct):
    method: str
    params: Raw | None


class Response(msgspec.Struct):
    id: Id
    result: Raw


class ErrorResponse(msgspec.Struct):
    id: Id | None
    error: ErrorObject


Message: TypeAlias = Request | Notification | Response | ErrorResponse


class DecodeFailure(Exception):
    """A line that is not a usable JSON-RPC message. ``id`` is kept when it was readable;
    ``unreadable`` says, for a line that could not be parsed at all, why not ("not
    valid UTF-8", "nested too deeply", "not JSON"); ``readable`` is what such a line
    reads as with its text mended, where only its text was at fault."""

    def __init__(
        self,
        code: int,
        message: str,
        id: Id | None = None,
        unreadable: str | None = None,
        readable: Message | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.id = id
        self.unreadable = unreadable
        self.readable = readable

    def reply(self) -> bytes:
        return encode_error(self.id, self.code, self.message)


class MalformedResponse(DecodeFailure):
    """A response that cannot be taken though it plainly answers a request: ``given``
    is its id as the peer wrote it (perhaps of the wrong type, ``24.0``), ``why`` says
    in a few words what is wrong with it."""

    def __init__(self, given: object, why: str) -> None:
        super().__init__(INVALID_REQUEST, f"Invalid response: {why}")
        self.given = given
        self.why = why


class InvalidParams(Exception):
    """Stage-two failure: the envelope was fine, the params (or result) were not."""


class RPCError(Exception):
    """A JSON-RPC error object received from a peer (not a local failure). Its ``data``
    is as the peer sent it (``msgspec.Raw``) when it came in a message: read it with
    ``data_as``, which decodes only the type asked for."""

    def __init__(self, code: int, message: str, data: object = UNSET) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data

    @classmethod
    def from_object(cls, err: ErrorObject) -> RPCError:
        return cls(err.code, err.message, err.data)

    def to_object(self) -> ErrorObject:
        return ErrorObject(self.code, self.message, self.data)

    def replaced(self, message: str, data: object) -> RPCError:
        """This error with another message and data (cleaned or masked), of the same
        kind: what a kind adds (an HTTP status) is kept."""
        return RPCError(self.code, message, data)

    def data_as(self, type_: type[T]) -> T | None:
        """This error's ``data`` as ``type_`` (a struct decodes only its own fields:
        whatever else a peer put there is skipped, not built); None when it is not one."""
        data = self.data
        try:
            if isinstance(data, Raw):
                return decoder_for(type_).decode(data)
            return msgspec.convert(data, type_)
        except (msgspec.DecodeError, RecursionError):
            return None


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


def valid_id(value: object) -> bool:
    # bool is an int subclass but never a valid id; floats are not ids either.
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


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
            if line_fault(data) is not None:
                raise DecodeFailure(
                    PARSE_ERROR, "Parse error: not JSON (text starting with '[')", None, "not JSON"
                ) from None
            # Batches left MCP with 2025-06-18; a 2025-03-26 peer may still send one.
            raise DecodeFailure(
                INVALID_REQUEST,
                "Invalid request: a JSON-RPC batch (an array of messages), which is not "
                "taken here; send each message on its own",
            ) from None
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
    if env.jsonrpc != "2.0":
        raise DecodeFailure(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"', msg_id)
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
    if b'"result"' not in data or not data.isascii() or b"\n" in data or b"\r" in data:
        return None
    try:
        return _result_line_decoder.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None


_decoders: dict[Any, Any] = {}


def decoder_for(type_: type[T]) -> msgspec.json.Decoder[T]:
    dec: msgspec.json.Decoder[T] | None = _decoders.get(type_)
    if dec is None:
        dec = _decoders[type_] = msgspec.json.Decoder(type_)
    return dec


def decode_as(raw: Raw | bytes | None, type_: type[T]) -> T:
    """Stage two: decode params or a result into ``type_``; absent params act as ``{}``."""
    data: Raw | bytes = b"{}" if raw is None else raw
    try:
        return decoder_for(type_).decode(data)
    except msgspec.ValidationError as exc:
        raise InvalidParams(str(exc)) from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise InvalidParams(f"malformed JSON: {exc}") from None


class _OutRequest(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    id: Id
    method: str
    params: Any = UNSET


class _OutNotification(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    method: str
    params: Any = UNSET


class _OutResult(msgspec.Struct):
    jsonrpc: str
    id: Id
    result: Any


class _OutError(msgspec.Struct):
    jsonrpc: str
    id: Id | None
    error: ErrorObject


class Late(abc.ABC):
    """A value built only as it is written: a table of thousands of tools is listed
    without holding an encoding of each one as well."""

    __slots__ = ()

    @abc.abstractmethod
    def wire(self) -> object:
        """What is encoded in this value's place."""


def _late(obj: object) -> object:
    if not isinstance(obj, Late):
        raise NotImplementedError(f"cannot encode {type(obj).__name__} as JSON")
    return obj.wire()


_encoder: Final = msgspec.json.Encoder(enc_hook=_late)


def encode(obj: object) -> bytes:
    return _encoder.encode(obj)


def encode_onto(obj: object, buffer: bytearray) -> None:
    """``obj`` encoded at the end of ``buffer``."""
    _encoder.encode_into(obj, buffer, -1)


def encode_request(id: Id, method: str, params: object = UNSET) -> bytes:
    # JSON-RPC allows params to be absent but never null; None means "no params".
    return _encoder.encode(_OutRequest("2.0", id, method, UNSET if params is None else params))


def encode_notification(method: str, params: object = UNSET) -> bytes:
    return _encoder.encode(_OutNotification("2.0", method, UNSET if params is None else params))


def encode_result(id: Id, result: object) -> bytes:
    """``result`` may be a ``msgspec.Raw`` to pass a peer's bytes through untouched."""
    return _encoder.encode(_OutResult("2.0", id, result))


def encode_error(id: Id | None, code: int, message: str, data: object = UNSET) -> bytes:
    return _encoder.encode(_OutError("2.0", id, ErrorObject(code, message, data)))


def encode_error_object(id: Id | None, error: ErrorObject) -> bytes:
    return _encoder.encode(_OutError("2.0", id, error))


class IdAllocator:
    """Monotonic integer ids: never reused, so never equal to one still pending."""

    __slots__ = ("next",)

    def __init__(self) -> None:
        # The counter's own method: taking an id runs no Python of ours.
        self.next: Callable[[], int] = itertools.count(1).__next__
