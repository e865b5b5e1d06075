"""JSON-RPC 2.0 as MCP uses it: messages, error codes, stage two of decoding, encoding.

Reading a line is in two stages. Stage one (``envelope``) decodes only the envelope and
keeps ``params``/``result`` (and an error's ``data``) as ``msgspec.Raw``. Stage two
(``decode_as``) decodes the params (or a result) into the type the caller asks for, with
decoders built once per type, so a peer's bytes are read only by what needs them.
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import Callable
from typing import Any, Final, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

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
# The longest string a request's id may be, in characters, and the integers one may
# be. Hosts number their requests (in a 64-bit integer, signed or not, or a double's
# whole numbers within it) or name them with a UUID; an id is kept for as long as its
# request runs and written back in every answer to it, so an id of any length would
# let a peer make mcpd hold and echo what it likes.
MAX_ID_LENGTH: Final = 256
MIN_INT_ID: Final = -(2**63)
MAX_INT_ID: Final = 2**64 - 1
# A JSON value whose shape is its sender's (an agent's capabilities, a server's
# annotations): read by narrowing, level by level. For signatures only: msgspec cannot
# decode into a recursive alias, so a struct's field is typed as msgspec reads it.
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


class BatchedReplies(DecodeFailure):
    """A JSON-RPC batch (an array of messages) that holds responses: ``given`` are the
    ids they were sent under, each answering a request that cannot take it as sent."""

    def __init__(self, message: str, given: tuple[object, ...]) -> None:
        super().__init__(INVALID_REQUEST, message)
        self.given = given
        self.why = "sent in a JSON-RPC batch (an array of messages, which is not taken)"


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


def id_too_long(length: int) -> str:
    """Why a request whose id is a string of ``length`` characters is refused."""
    return (
        f"Invalid request: its id is a string of {length} characters, over the "
        f"{MAX_ID_LENGTH} an id may have; send a shorter id"
    )


def id_out_of_range(value: int) -> str:
    """Why a request whose id is the integer ``value`` is refused (it is not echoed:
    the message gives its digits' count alone)."""
    digits = len(str(abs(value)))
    return (
        f"Invalid request: its id is an integer of {digits} digits, outside the "
        f"{MIN_INT_ID} to {MAX_INT_ID} an id may be; send a smaller id"
    )


def valid_id(value: object) -> bool:
    # bool is an int subclass but never a valid id; floats are not ids either.
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


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
