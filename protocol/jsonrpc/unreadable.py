"""Which request a reply that cannot be parsed answered, when that is certain.

A reply with invalid UTF-8 in a string, nested deeper than the decoder goes, or with a
broken token is no message; but its id may still be plain to see, and then the request
it answered can fail at once with the reason instead of waiting out its time limit.
Only an id that is surely the outer object's own counts, on a line that surely is one
whole reply: a wrong guess would fail some other request.
"""

from __future__ import annotations

import itertools
import re
from typing import Final

import msgspec

from ..lines.nesting import STRING, bracket_steps
from . import envelope
from . import messages as rpc

# For a reply that cannot be parsed: its id where it is a member of the outer object
# for sure, as the first member after an optional "jsonrpc" and followed by "result" or
# "error" (most SDKs), or as the last one of an object that begins with "result" or
# "error" (the TypeScript SDK's order).
_V: Final = rb'(-?\d+|"[^"\\]*(?:\\.[^"\\]*)*")'
_JSONRPC: Final = rb'"jsonrpc"\s*:\s*"2\.0"\s*'
_REPLY_HEAD: Final = re.compile(
    rb"^\s*\{\s*(?:" + _JSONRPC + rb',\s*)?"id"\s*:\s*' + _V + rb'\s*,\s*"(?:result|error)"\s*:'
)
_REPLY_OPENS: Final = re.compile(rb'^\s*\{\s*"(?:result|error)"\s*:')
_REPLY_TAIL: Final = re.compile(
    rb',\s*"id"\s*:\s*' + _V + rb"\s*(?:,\s*" + _JSONRPC + rb")?\}\s*\Z"
)
_PASSES: Final = 16
_RUNS: Final = re.compile(rb"\x02+|\x00+")
_MAX_SCAN: Final = 1 << 20  # bytes: bounds the scan of the worst of them


def _one_object(line: bytes) -> bool:
    """Whether the brackets of ``line`` outside its strings make one object that closes
    at its last bracket: a cut-off line is never taken for a whole reply. Done with
    regular expressions and C-level loops, not a parser, and in bounded time: a broken
    line is no reason to hold up the event loop, or to recurse into its nesting."""
    # Each string as one quote: a string that never ends runs to the end of the line, as
    # does one after the object, and neither line ends with the object's bracket.
    skeleton = STRING.sub(b'"', line)
    if skeleton.endswith(b'"'):
        return False
    skeleton = skeleton.replace(b'"', b"")
    steps = bracket_steps(skeleton)
    if len(steps) < 2 or steps[0] != 2 or steps[-1] != 0 or sum(steps) != len(steps):
        return False
    # Inside the outer object the depth must never fall below where it began. A bracket
    # that opens followed by one that closes changes no lowest point: dropping such
    # pairs leaves runs of opening and closing brackets, few but for a hostile line, and
    # the depth is lowest at the end of a run of closing ones.
    inner = steps[1:-1]
    for _ in range(_PASSES):
        fewer = inner.replace(b"\x02\x00", b"")
        if len(fewer) == len(inner):
            break
        inner = fewer
    moves = [len(run) if run[0] else -len(run) for run in _RUNS.findall(inner)]
    return min(itertools.accumulate(moves), default=0) >= 0


def reply_id(line: bytes) -> rpc.Id | None:
    """The id of a reply that cannot be parsed (invalid UTF-8, a lone surrogate,
    nested too deeply, not JSON), where it can be told without parsing: in the outer
    object, next to its ``result`` or ``error``, of a line whose brackets close where
    it ends. None for
    anything less certain, such as a request from the peer, whose id is its own."""
    if not line.isascii() or b"\\u" in line:
        # Text that is no text (bytes not UTF-8, half a surrogate pair) needs no
        # guessing: with it mended, the message says exactly what it is.
        try:
            envelope.decode_message(line)
        except rpc.DecodeFailure as exc:
            msg = exc.readable
            if msg is not None:
                return msg.id if isinstance(msg, rpc.Response | rpc.ErrorResponse) else None
    if len(line) > _MAX_SCAN:
        return None
    m = _REPLY_HEAD.match(line)
    if m is None and _REPLY_OPENS.match(line):
        m = _REPLY_TAIL.search(line)
    if m is None or not _one_object(line):
        return None
    return _id_in(m)


# A message too large to decode: its id where JSON-RPC peers put it.
_ID_AT_START: Final = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _V)
# A message's last member, closing the object: an id there is the message's own.
_ID_AT_END: Final = re.compile(rb'"id"\s*:\s*' + _V + rb"\s*\}\s*\Z")


def id_at_edges(head: bytes, tail: bytes = b"") -> rpc.Id | None:
    """The id of a message too large to decode, from its first or last bytes, where
    JSON-RPC peers put it (``{"jsonrpc":"2.0","id":7,...`` or ``...,"id":7}``)."""
    return _id_in(_ID_AT_START.match(head) or _ID_AT_END.search(tail))


def _id_in(m: re.Match[bytes] | None) -> rpc.Id | None:
    """The id a pattern found, if it is one."""
    if m is None:
        return None
    try:
        found = msgspec.json.decode(m.group(1))
    except msgspec.DecodeError:
        return None
    return found if rpc.valid_id(found) else None
