"""The tools/call splice: a call routed from its envelope, its arguments and its result
passed on as the bytes they came in.

An agent's ``tools/call`` line is decoded here only as far as routing needs: the id,
the tool name, and the arguments and ``_meta`` kept as raw bytes. The two lines mcpd
then writes for the call, the request to its server and the reply to the agent, are
built here around those bytes instead of being encoded again.

Such a line needs no second check that it is one line of JSON (the check every other
line gets as it is written, which parses it once more): each of its parts is written
here, encoded by msgspec, or came out of a decode that accepted it as JSON from a
line that held no line break and whose text was checked. A line built here is typed
``Spliced``; the line writers take one without checking it, and nothing else makes one.
A call this decoder does not take (anything but an ordinary ``tools/call`` in ASCII) is
decoded the general way, and its lines are checked as they are written.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, NewType

import msgspec
from msgspec import UNSET, Raw, UnsetType

from .messages import MAX_ID_LENGTH, MIN_INT_ID, Id
from .numbers import plain_line

_MAX_SIGNED: Final = 2**63 - 1

# One line (without its newline) built here: written as it is.
Spliced = NewType("Spliced", bytes)


class CallParams(msgspec.Struct, forbid_unknown_fields=True):
    """What routing needs of a call's params. Any other member (an input retry's
    ``requestState``, a task request) makes it a call for the general decoder."""

    name: str
    arguments: Raw | UnsetType = UNSET
    meta: Raw | UnsetType = msgspec.field(name="_meta", default=UNSET)


class SplicedRequest(msgspec.Struct):
    """An ordinary tools/call line decoded as far as routing needs (``decode_call``)."""

    jsonrpc: Literal["2.0"]
    # A longer id, or a larger one, is left to the general decoder, which refuses it
    # saying why (msgspec bounds an integer within 64 signed bits at most: the unsigned
    # ones past them, which are ids still, are read there too).
    id: (
        Annotated[int, msgspec.Meta(ge=MIN_INT_ID, le=_MAX_SIGNED)]
        | Annotated[str, msgspec.Meta(max_length=MAX_ID_LENGTH)]
    )
    method: Literal["tools/call"]
    params: CallParams


_calls: Final = msgspec.json.Decoder(SplicedRequest)


def decode_call(line: bytes) -> SplicedRequest | None:
    """An ordinary tools/call, or None for any other line (the general decoder then
    handles it, and says what is wrong with it). Only ASCII is taken here: msgspec does
    not check the text of what it keeps raw, and the general decoder does."""
    if not line.isascii():
        return None
    # Arguments kept raw are passed on unread: a call holding a number common decoders
    # do not read, or a line break, is left to the general decoder, which refuses it
    # saying so.
    if not plain_line(line):
        return None
    try:
        return _calls.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None


_encode: Final = msgspec.json.Encoder().encode
_HEAD: Final = b'{"jsonrpc":"2.0","id":'


class CallShape:
    """The constant parts of the requests for one tool at one server: all but the id,
    the arguments and a progress token. ``meta`` is the request's ``_meta`` without a
    progress token, encoded (None: none)."""

    __slots__ = ("_args", "_head", "_tail", "_token")

    def __init__(self, name: str, meta: bytes | None) -> None:
        self._head = b',"method":"tools/call","params":{"name":' + _encode(name)
        self._args = self._head + b',"arguments":'
        if meta is None:
            self._tail = b"}}"
            self._token = b',"_meta":{"progressToken":'
        else:
            self._tail = b',"_meta":' + meta + b"}}"
            # The same object, one member more (an envelope is never empty).
            self._token = b',"_meta":' + meta[:-1] + b',"progressToken":'

    def request(self, rid: int, arguments: Raw | UnsetType, token: str | None = None) -> Spliced:
        """The request line under the id ``rid``, with ``token`` as its progress token
        if given. ``arguments`` were decoded from a checked line (here or by the general
        decoder) or encoded by msgspec, as every ``CallToolParams.arguments`` is."""
        if arguments is UNSET:
            head: tuple[bytes | Raw, ...] = (_HEAD, b"%d" % rid, self._head)
        else:
            head = (_HEAD, b"%d" % rid, self._args, arguments)
        if token is None:
            return Spliced(b"".join((*head, self._tail)))
        return Spliced(b"".join((*head, self._token, _encode(token), b"}}}")))


class SplicedCall(msgspec.Struct, frozen=True, gc=False):
    """A tools/call to be spliced, as a transport takes it in place of params: it
    picks the id and asks this for the line (or body) under it."""

    shape: CallShape
    arguments: Raw | UnsetType
    token: str | None  # mcpd's progress token for it (None: none)

    def body(self, rid: int) -> Spliced:
        return self.shape.request(rid, self.arguments, self.token)


def reply(agent_id: Id, result: Raw) -> Spliced:
    """The reply line carrying a server's ``result`` as it came: ``result`` is a raw
    result a transport decoded from one line of JSON (or that with ``resultType`` put in
    front of its members, ``agents.calls.results``)."""
    return Spliced(b"".join((_HEAD, _encode(agent_id), b',"result":', result, b"}")))
