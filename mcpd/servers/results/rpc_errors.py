"""A server's JSON-RPC error as agents get it.

A server that is up but will not do what it was asked (arguments it rejects, a prompt
it does not have) answers with an error, and mcpd passes it on as one. Its message,
and its data where that is text, go before a model or a person as the server's other
texts do, so they are cleaned as those are (``registry.text.clean``); whatever the server
put under mcpd's own keys in its data is dropped (``registry.text.own_keys``); and every
secret mcpd holds is masked, after the cleaning (which could join a secret split by a
character nobody sees). Where mcpd puts such a message into words of its own (an
outage's reason, a line of its log), it quotes it (``protocol.shown.visible.quote``); where
it answers an agent's request with it, the message is marked with the server as its
descriptions are (``marked_error``, ``registry.text.marking``).

A few of a server's errors are not about what the agent asked but about mcpd's
request to the server: the protocol version it was made for (-32022), its HTTP headers
(-32020), the client capabilities declared with it (-32021). Passed on as they are,
they would tell the agent that mcpd, its own server, does not speak its version or
read its headers, and over HTTP they would be answered with 400, as mcpd's own are.
Such an error reaches an agent as one of mcpd's own instead (``hop_error``), naming
the server and what went wrong between mcpd and it.

Its data goes on as the bytes it came as (``protocol.jsonrpc.messages`` keeps them), as a
result's do, unless it is text (one value, decoded to be cleaned) or a scan of it
(``data_findings``) finds what must change: then it is taken apart (decoded whole,
walked and encoded again), and how large a data is taken apart so, and where, is
``taking_apart``'s to say, as it is for a result.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply
from protocol.shown.visible import quote

from ...policy.redaction.guard import SecretGuard
from ...registry.text import own_keys
from ...registry.text.clean import clean_text
from ...registry.text.marking import said_by
from .rpc_results import Findings, written

_QUOTE: Final = ord('"')
_text: Final = msgspec.json.Decoder(str)


def data_findings(guard: SecretGuard, alias: str, exc: rpc.RPCError) -> Findings | None:
    """Why ``exc``'s data must be taken apart before agents get it; None (nearly every
    error) when it need not: it holds neither a key of mcpd's nor a secret's form, is
    text, or was not sent as bytes (an error of mcpd's making)."""
    data = exc.data
    if not isinstance(data, Raw) or _is_text(data):
        return None
    own = own_keys.may_hold(data)
    secret = guard.finds(alias, data)
    return Findings(own, secret) if own or secret else None


def error_for_agents(
    guard: SecretGuard, alias: str, exc: rpc.RPCError, what: str, found: Findings | None
) -> rpc.RPCError:
    """``exc`` as it may reach an agent: itself when nothing needed changing. ``found``:
    what ``data_findings`` found in its data, which is taken apart here and now,
    whatever it costs (``taking_apart.ReplyWork`` bounds it). Touches nothing of the
    event loop's: it may run in a worker thread."""
    message, removed = clean_text(exc.message)
    data = exc.data
    if isinstance(data, Raw):
        if found is not None:
            data = _taken_apart(guard, alias, data, what, found)
        elif _is_text(data):
            data, removed_there = clean_text(_text.decode(data))
            removed += removed_there
    elif isinstance(data, str):
        data, count = clean_text(data)
        removed += count
    elif isinstance(data, dict | list):
        data = _without_own_keys(data)
    if removed or data is not exc.data:
        exc = exc.replaced(message, data)
    return guard.rpc_error(alias, exc, what)


def marked_error(alias: str, exc: rpc.RPCError) -> rpc.RPCError:
    """``exc`` (``alias``'s, made fit by ``error_for_agents``) as the answer to an agent's
    request: its message with the server's mark in front, and on each later line that
    begins with a bracket, so that it cannot pass for mcpd's words or another server's."""
    message = said_by(alias, exc.message)
    return exc if message == exc.message else exc.replaced(message, exc.data)


# What each of those errors says went wrong with mcpd's request to the server.
_HOPS: Final = {
    rpc.UNSUPPORTED_PROTOCOL_VERSION: (
        "it does not speak the protocol version mcpd's request to it was made for; "
        "mcpd asks it again which versions it speaks"
    ),
    rpc.HEADER_MISMATCH: "the HTTP headers of mcpd's request to it did not match the request",
    rpc.MISSING_REQUIRED_CLIENT_CAPABILITY: (
        "it needs a client capability that was not declared with the request (mcpd "
        "declares to it what the agent behind the request declared)"
    ),
}


def hop_error(alias: str, exc: rpc.RPCError) -> rpc.RPCError | None:
    """``exc`` (``alias``'s, made fit by ``error_for_agents``) as mcpd's own error when it
    is about mcpd's request to the server, not what the agent asked; None for any other.
    Only -32021's data goes along: what it needs is what an agent could declare."""
    said = _HOPS.get(exc.code)
    if said is None:
        return None
    message = (
        f"mcpd's request to the server {alias!r} failed: the server answered that {said} "
        f"(its error {quote(exc.message)}). This is between mcpd and the server, not "
        "something wrong with this request."
    )
    keep = exc.code == rpc.MISSING_REQUIRED_CLIENT_CAPABILITY
    return rpc.RPCError(rpc.INTERNAL_ERROR, message, exc.data if keep else UNSET)


def answer_error(alias: str, exc: rpc.RPCError) -> rpc.RPCError:
    """``exc`` (``alias``'s, made fit by ``error_for_agents``) as the answer to an agent's
    request: mcpd's own error when it is about mcpd's request to the server
    (``hop_error``), else the server's, marked (``marked_error``)."""
    return hop_error(alias, exc) or marked_error(alias, exc)


def call_error(
    guard: SecretGuard, alias: str, exc: rpc.RPCError, what: str, found: Findings | None
) -> rpc.RPCError:
    """``error_for_agents``, answered: a server's error as the outcome of an agent's
    call (``answer_error``)."""
    return answer_error(alias, error_for_agents(guard, alias, exc, what, found))


def _is_text(data: Raw) -> bool:
    return len(data) > 0 and memoryview(data)[0] == _QUOTE


def _taken_apart(guard: SecretGuard, alias: str, raw: Raw, what: str, found: Findings) -> Raw:
    try:
        data: Any = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        # Not reached: the transport took the message for JSON it could decode.
        raise MalformedReply(f"{alias}: the data of {what} could not be read again") from None
    if found.own:
        own_keys.drop_from_data(data)
    if found.secret:
        data = guard.value(alias, data, what)
    return written(guard, alias, raw, data, what, masked=found.secret)


def _without_own_keys(data: dict[str, Any] | list[Any]) -> Any:
    """``data``, or a copy of it without keys of mcpd's (the error a transport handed
    over is not changed: others may hold it)."""
    raw = msgspec.json.encode(data)
    if not own_keys.may_hold(raw):
        return data
    copy = msgspec.json.decode(raw)
    return copy if own_keys.drop_from_data(copy) else data
