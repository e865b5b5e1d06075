"""A server's JSON-RPC error as agents get it.

A server that is up but will not do what it was asked (arguments it rejects, a prompt
it does not have) answers with an error, and mcpd passes it on as one. Its message,
and its data where that is text, go before a model or a person as the server's other
texts do, so they are cleaned as those are (``registry.clean``); whatever the server
put under mcpd's own keys in its data is dropped (``registry.own_keys``); and every
secret mcpd holds is masked, after the cleaning (which could join a secret split by a
character nobody sees). Where mcpd puts such a message into words of its own (an
outage's reason, a line of its log), it quotes it (``protocol.visible.quote``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from protocol import jsonrpc as rpc

from ..policy.guard import SecretGuard
from ..registry import own_keys
from ..registry.clean import clean_text


def error_for_agents(guard: SecretGuard, alias: str, exc: rpc.RPCError, what: str) -> rpc.RPCError:
    """``exc`` as it may reach an agent: itself when nothing needed changing."""
    message, removed = clean_text(exc.message)
    data = exc.data
    if isinstance(data, str):
        data, count = clean_text(data)
        removed += count
    elif isinstance(data, dict | list):
        data = _without_own_keys(data)
    if removed or data is not exc.data:
        exc = rpc.RPCError(exc.code, message, data)
    return guard.rpc_error(alias, exc, what)


def _without_own_keys(data: dict[str, Any] | list[Any]) -> Any:
    """``data``, or a copy of it without keys of mcpd's (the error a transport handed
    over is not changed: others may hold it)."""
    raw = msgspec.json.encode(data)
    if not own_keys.may_hold(raw):
        return data
    copy = msgspec.json.decode(raw)
    return copy if own_keys.drop_from_data(copy) else data
