"""A server's JSON-RPC error as agents get it.

A server that is up but will not do what it was asked (arguments it rejects, a prompt
it does not have) answers with an error, and mcpd passes it on as one. Its message,
and its data where that is text, go before a model or a person as the server's other
texts do, so they are cleaned as those are (``registry.clean``); whatever the server
put under mcpd's own keys in its data is dropped (``registry.own_keys``); and every
secret mcpd holds is masked, after the cleaning (which could join a secret split by a
character nobody sees). Where mcpd puts such a message into words of its own (an
outage's reason, a line of its log), it quotes it (``protocol.visible.quote``); where
it answers an agent's request with it, the message is marked with the server as its
descriptions are (``marked_error``, ``registry.marking``).

Its data goes on as the bytes it came as (``protocol.jsonrpc`` keeps them), as a
result's do, unless it is text (one value, decoded to be cleaned) or a scan of it
(``data_findings``) finds what must change: then it is taken apart (decoded whole,
walked and encoded again), and how large a data is taken apart so, and where, is
``taking_apart``'s to say, as it is for a result.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import Raw

from protocol import jsonrpc as rpc
from transports.errors import MalformedReply

from ..policy.guard import SecretGuard
from ..registry import own_keys
from ..registry.clean import clean_text
from ..registry.marking import said_by
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


def call_error(
    guard: SecretGuard, alias: str, exc: rpc.RPCError, what: str, found: Findings | None
) -> rpc.RPCError:
    """``error_for_agents``, marked: a server's error as the outcome of an agent's call."""
    return marked_error(alias, error_for_agents(guard, alias, exc, what, found))


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
