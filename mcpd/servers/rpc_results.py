"""A server's result as agents get it.

What a server answers an agent's request with goes on with every secret mcpd holds
masked (``policy.guard``) and whatever the server put under mcpd's own keys in any
``_meta`` in it dropped (``registry.own_keys``). The requests of an ``input_required``
are read by a person or a model, whether they reach a modern agent as they are or a
legacy agent as requests of mcpd's own: their texts are cleaned first (the cleaning
could join a secret split by a character nobody sees, so it comes before the masking)
and they are marked with the server (``registry.relayed``), as a legacy server's own
requests are. A server's JSON-RPC error is made fit likewise (``rpc_errors``).
"""

from __future__ import annotations

import logging
from typing import Any, Final

import msgspec

from protocol import mcp
from protocol.logfields import log_extra
from transports.errors import MalformedReply

from ..policy.guard import SecretGuard
from ..registry import own_keys
from ..registry.relayed import cleaned, marked

logger = logging.getLogger("mcpd.askback")


class _Look(msgspec.Struct):
    """What every result is read for, in one decode that skips the rest: whether it
    is ``input_required``."""

    resultType: object = None


_look: Final = msgspec.json.Decoder(_Look)
_INPUT_REQUIRED: Final = mcp.INPUT_REQUIRED
_may_hold_own: Final = own_keys.may_hold


def result_for_agents(
    guard: SecretGuard, alias: str, raw: msgspec.Raw, what: str, *, task: bool = False
) -> msgspec.Raw:
    """A server's result as agents may get it: every secret mcpd holds masked (the same
    bytes when it holds none), and whatever the server put under mcpd's own keys in
    any ``_meta`` in it (its own, its content's) dropped (``registry.own_keys``); an
    ``input_required``'s requests, which a person or a model reads, also cleaned before
    that and marked with the server, as a legacy server's own requests are.

    ``task``: ``raw`` is a task as the tasks extension shows one (a tasks method's
    result, a ``notifications/tasks``' params), whose requests are those it waits on
    and those of the tool's result it ended with."""
    own = _may_hold_own(raw)
    if not own and not task:
        try:
            look = _look.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            return guard.raw(alias, raw, what)  # not an object: no request in it
        if look.resultType != _INPUT_REQUIRED:
            return guard.raw(alias, raw, what)  # every call, nearly
    try:
        result: Any = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        # Not reached: the transport took the line for valid UTF-8 and not too deep.
        raise MalformedReply(f"{alias}: {what} could not be read again") from None
    # Decoded whole and encoded again, even with nothing dropped: a _meta given twice
    # goes on as the one mcpd read (the last), which every reader then reads.
    if own:
        own_keys.drop_from_meta(result)
    for request in _requests(result, task):
        request["params"] = cleaned_request(alias, request["method"], request.get("params"))
    result = guard.value(alias, result, what)
    for request in _requests(result, task):
        request["params"] = marked(alias, request["method"], request.get("params"))
    return own_keys.reencoded(raw, result)


def cleaned_request(alias: str, method: str, params: Any) -> Any:
    """``cleaned``, and the journal told when something was taken out."""
    params, removed = cleaned(method, params)
    if removed:
        logger.info(
            "%s: took %d invisible or control character%s out of its %s request",
            alias,
            removed,
            "s" if removed != 1 else "",
            method,
            extra=log_extra(alias, "ask_cleaned"),
        )
    return params


def _requests(result: Any, task: bool) -> list[dict[str, Any]]:
    """The requests of an ``input_required`` result (none for any other); of a task,
    those it waits on and those of its result."""
    if not isinstance(result, dict):
        return []
    if not task:
        return _asked(result) if result.get("resultType") == _INPUT_REQUIRED else []
    ended = result.get("result")
    inner = ended if isinstance(ended, dict) and ended.get("resultType") == _INPUT_REQUIRED else {}
    return _asked(result) + _asked(inner)


def _asked(result: dict[str, Any]) -> list[dict[str, Any]]:
    asks = result.get("inputRequests")
    if not isinstance(asks, dict):
        return []
    return [r for r in asks.values() if isinstance(r, dict) and isinstance(r.get("method"), str)]
