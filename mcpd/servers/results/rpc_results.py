"""A server's result as agents get it.

What a server answers an agent's request with goes on with every secret mcpd holds
masked (``policy.redaction.guard``) and whatever the server put under mcpd's own keys in any
``_meta`` in it dropped (``registry.text.own_keys``). The requests of an ``input_required``
are read by a person or a model, whether they reach a modern agent as they are or a
legacy agent as requests of mcpd's own: their texts are cleaned first (the cleaning
could join a secret split by a character nobody sees, so it comes before the masking)
and they are marked with the server (``registry.text.relayed``), as a legacy server's own
requests are. A request that lacks what its method requires (``features.unfit_request``)
fails the whole result as malformed (``UnfitRequest``): an agent would be shown an
empty form, or sample nothing. A server's JSON-RPC error is made fit likewise
(``rpc_errors``).

Most results go on as the bytes they came as: a scan of them (``findings``) finds
nothing to change. One that may hold a key of mcpd's, holds the bytes of a secret mcpd
holds, may give ``resultType`` twice, or ends its call with ``input_required`` (a task:
always, for the requests it may wait on) is taken apart (``taken_apart``): decoded
whole, walked in Python and encoded again. How large a result is taken apart so, and
where, is ``taking_apart``'s to say.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Final, NamedTuple

import msgspec
from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc.reply_faults import MalformedReply
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.shown.logfields import log_extra
from protocol.shown.visible import METHOD_SHOWN, quote

from ...policy.redaction.guard import SecretGuard
from ...registry.text import own_keys
from ...registry.text.relayed import cleaned, marked_params

logger = logging.getLogger("mcpd.askback")


class Findings(NamedTuple):
    """What in a result makes it need taking apart (what it asks, when neither)."""

    own: bool  # it may hold a key of mcpd's
    secret: bool  # it holds what the guard masks
    # A legacy server's, with a ``resultType`` its era has none of: left out, so that
    # it is the plain result it is in that era, never a round of input or a task.
    stray_kind: bool = False
    # It may give ``resultType`` twice (``_kind_given_twice``): written again as mcpd
    # read it, the last, so that no agent reads another kind of result than mcpd did.
    kind_twice: bool = False

    @property
    def why(self) -> str:
        if self.own:
            return "drop what it put under mcpd's keys"
        if self.secret:
            return "mask a secret it holds"
        if self.stray_kind:
            return "leave out a resultType its era has none of"
        if self.kind_twice:
            return "write once a resultType it may give twice"
        return "clean what it asks the agent"


class _Look(msgspec.Struct):
    """What every result is read for, in one decode that skips the rest: whether it
    is ``input_required``."""

    resultType: object | UnsetType = UNSET


_look: Final = msgspec.json.Decoder(_Look)
# A tools/call result's head as the agent side shapes it (its blocks' kinds, its
# ``resultType``, whether it is an error): read once, here.
_call_head: Final = msgspec.json.Decoder(mcp.CallToolResultKinds)
_NOT_ASKING: Final = _Look()
_SECRET: Final = Findings(own=False, secret=True)
_INPUT_REQUIRED: Final = mcp.INPUT_REQUIRED
_may_hold_own: Final = own_keys.may_hold
_KIND: Final = re.compile(rb'"resultType"')
_ESCAPE: Final = re.compile(rb"\\u")
# A key written with an escape, short enough to spell ``resultType`` so.
_ESCAPED_KEY: Final = re.compile(rb'"([A-Za-z0-9\\]{10,60})"\s*:')


def _kind_given_twice(raw: Raw) -> bool:
    """Whether ``raw`` may give ``resultType`` twice in one object, which readers read
    differently (msgspec as mcpd does, the last; a streaming reader, the first): it
    writes that key more than once anywhere, escapes and all. Most results write it
    once, and with no escape, so the escapes are looked into only when there are any."""
    count = 0
    for _ in _KIND.finditer(raw):
        count += 1
        if count > 1:
            return True
    if _ESCAPE.search(raw) is None:
        return False
    return count + sum(_spells_kind(key[1]) for key in _ESCAPED_KEY.finditer(raw)) > 1


def _spells_kind(key: bytes) -> bool:
    """Whether ``key``, as a JSON string writes it between its quotes, is ``resultType``
    written with an escape (what looked like a key may be a string's text: a stray
    escape in it then reads as nothing)."""
    if b"\\" not in key:
        return False
    try:
        return bool(msgspec.json.decode(b'"' + key + b'"') == "resultType")
    except msgspec.DecodeError:
        return False


def findings(
    guard: SecretGuard, alias: str, raw: Raw, *, task: bool = False, legacy: bool = False
) -> Findings | None:
    """Why ``raw`` (a server's result) must be taken apart before agents get it; None
    (every call, nearly) when it goes on as it came.

    ``task``: ``raw`` is a task as the tasks extension shows one (a tasks method's
    result, a ``notifications/tasks``' params), whose requests are those it waits on
    and those of the tool's result it ended with. ``legacy``: ``raw`` is a legacy
    server's, whose ``resultType`` means nothing (``Findings.stray_kind``)."""
    if _may_hold_own(raw):
        return Findings(True, guard.finds(alias, raw), legacy and not task)
    if _kind_given_twice(raw):
        return Findings(False, guard.finds(alias, raw), legacy and not task, kind_twice=True)
    if not task:
        try:
            look = _look.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            look = _NOT_ASKING  # not an object: no request in it
        if legacy and look.resultType is not UNSET:
            return Findings(False, guard.finds(alias, raw), stray_kind=True)
        if look.resultType != _INPUT_REQUIRED:
            # Every call, nearly: nothing here either.
            return _SECRET if guard.finds(alias, raw) else None
    return Findings(False, guard.finds(alias, raw))


def call_look(
    guard: SecretGuard, alias: str, raw: Raw, *, legacy: bool = False
) -> Findings | mcp.CallToolResultKinds | None:
    """``findings`` for a tools/call's result, whose head is read once for both sides:
    what makes it need taking apart; else (every call, nearly) that head, which the
    agent side shapes the result by (``Call.head``); None when the result goes on as it
    came but its head is not one an agent can take (the agent side says why)."""
    if _may_hold_own(raw):
        return Findings(True, guard.finds(alias, raw), legacy)
    if _kind_given_twice(raw):
        return Findings(False, guard.finds(alias, raw), legacy, kind_twice=True)
    try:
        head = _call_head.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return findings(guard, alias, raw, legacy=legacy)
    if legacy and head.resultType is not UNSET:
        return Findings(False, guard.finds(alias, raw), stray_kind=True)
    if head.resultType != _INPUT_REQUIRED:
        return _SECRET if guard.finds(alias, raw) else head
    return Findings(False, guard.finds(alias, raw))


def taken_apart(
    guard: SecretGuard, alias: str, raw: Raw, what: str, found: Findings, *, task: bool = False
) -> Raw:
    """``raw`` as agents may get it, for what ``findings`` found in it: every secret
    mcpd holds masked (the same bytes when it holds none), whatever the server put
    under mcpd's own keys in any ``_meta`` in it dropped (``registry.text.own_keys``), and an
    ``input_required``'s requests, which a person or a model reads, cleaned and marked
    with the server, as a legacy server's own requests are. Touches nothing of the
    event loop's: it may run in a worker thread (``taking_apart.ReplyWork`` bounds it)."""
    try:
        result: Any = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        # Not reached: the transport took the line for valid UTF-8 and not too deep.
        raise MalformedReply(f"{alias}: {what} could not be read again") from None
    if found.own:
        own_keys.drop_from_meta(result)
    if found.stray_kind and isinstance(result, dict):
        result.pop("resultType", None)
    unfit = _unfit_ask(result, task)
    if unfit is not None:
        raise refused_ask(alias, f"its input_required result {unfit}")
    asks = _requests(result, task)
    for request in asks:
        request["params"] = cleaned_request(alias, request["method"], request.get("params"))
    if found.secret:
        masked = guard.value(alias, result, what)
        if masked is result and not (found.own or found.stray_kind or found.kind_twice or asks):
            return raw  # nothing to mask after all: a reply stays spliced
        result = masked
    else:
        # The cleaning could join a secret split by a character nobody sees.
        for request in asks:
            request["params"] = guard.value(alias, request["params"], what)
    for request in _requests(result, task):
        request["params"] = marked_params(alias, request["method"], request.get("params"))
    # Encoded again even with nothing dropped: a _meta given twice goes on as the one
    # mcpd read (the last), which every reader then reads.
    return written(guard, alias, raw, result, what, masked=found.secret)


def written(
    guard: SecretGuard, alias: str, raw: Raw, value: object, what: str, *, masked: bool
) -> Raw:
    """``value`` (decoded from ``raw``, and walked for secrets when ``masked``) as mcpd
    writes it: ``raw`` itself when that is what it encodes to. Not walked yet, it is
    searched as written (``SecretGuard.written``)."""
    encoded = msgspec.json.encode(value) if masked else guard.written(alias, value, what)
    return raw if memoryview(raw) == encoded else Raw(encoded)


def cleaned_request(alias: str, method: str, params: object) -> object:
    """``cleaned``, and the journal told when something was taken out; without a
    ``task`` augmentation. mcpd declares no task support to a server, for any request,
    and a receiver that declared none answers such a request as a plain one: so is the
    agent asked it, whatever the agent declared, and the server gets a plain answer."""
    if isinstance(params, dict) and "task" in params:
        params = {key: value for key, value in params.items() if key != "task"}
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


class UnfitRequest(MalformedReply):
    """A request a server makes of its client (in an ``input_required`` result, or of
    its own) that lacks what its method requires: no agent is asked it, as an empty form
    or a sample of no messages would be. Only the request it came with fails."""


def refused_ask(alias: str, what: str) -> UnfitRequest:
    """The refusal of what a server asked (``what`` says why), the journal told."""
    logger.warning(
        "%s: %s; no agent is asked it", alias, what, extra=log_extra(alias, "ask_refused", what)
    )
    return UnfitRequest(f"{alias}: {what}; no agent was asked it")


def _unfit_ask(result: Any, task: bool) -> str | None:
    """What in the requests of an ``input_required`` result (of a task: those it
    waits on and those of its result) is malformed, in words; None if nothing."""
    if not isinstance(result, dict):
        return None
    results = [result] if task or result.get("resultType") == _INPUT_REQUIRED else []
    ended = result.get("result") if task else None
    if isinstance(ended, dict) and ended.get("resultType") == _INPUT_REQUIRED:
        results.append(ended)
    for one in results:
        asks = one.get("inputRequests")
        if asks is None:
            continue
        if not isinstance(asks, dict):
            return "has inputRequests that are not an object"
        for key, ask in asks.items():
            shown = quote(key, METHOD_SHOWN)
            method = ask.get("method") if isinstance(ask, dict) else None
            if not isinstance(method, str):
                return f"holds request {shown}, which names no method"
            if features.needs(method) is None:
                named = quote(method, METHOD_SHOWN)
                return f"holds request {shown} for {named}, which no server may ask of a client"
            why = features.unfit_request(method, ask.get("params"))
            if why is not None:
                return f"holds request {shown} ({method}), whose {why}"
    return None


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
