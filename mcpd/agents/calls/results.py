"""What happens to a tool's result between the server and the agent.

A tool's result reaches an agent as a tools/call's, or as the result a task ended with
(in ``tasks/get`` and ``notifications/tasks``): ``result_for`` shapes it for either,
the one way, so the two cannot drift.

Most results pass through as the server's own bytes. They are decoded only as far as
needed to check ``resultType`` and (for a result longer than the budget) measure text;
re-encoding happens only when text must be cut to the budget, and then of the content
alone, and at the top level only when something in the result has no place in the
agent's era (``result_eras``). A result longer than the budget is also checked for a
``_meta`` past its bound, its own or a content block's (or a block's ``annotations``),
which is left out (``result_bounds``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Protocol

import msgspec
from msgspec import UNSET, Raw

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.shown.visible import quote

from ...registry.uris.scheme import Sight
from ...servers.shared import AgentKey, Outage, SessionMark
from ..askback import unanswered
from ..askback.unanswered import unanswered_text
from .result_bounds import blocks_within, meta_within
from .result_eras import for_era

_RESULT_TYPE_FIELD: Final = b'"resultType":"complete"'
_QUOTE: Final = ord('"')
_BRACE: Final = ord("{")
# Content blocks that carry a server's URI, which the agent gets rewritten.
_LINKS: Final = frozenset({"resource", "resource_link"})
_NO_CONTENT: Final = "no content (a tool's result holds a list of content blocks, empty or not)"


# A result's head, with its texts skipped or read: held here, not looked up through
# rpc.decode_as on every call.
_KINDS: Final = msgspec.json.Decoder(mcp.CallToolResultKinds)
_HEADS: Final = msgspec.json.Decoder(mcp.CallToolResultHead)
_MEMBERS: Final = msgspec.json.Decoder(dict[str, Raw])

# (the result, whether it may hold links, whether it is an error)
Shaped = tuple[Raw | dict[str, object], bool, bool]


class Recipient(Protocol):
    """Whom a tool's result goes to, as far as its shape goes: the call that asked for
    it (``agent.AgentCall``), or the agent whose task ended with it."""

    @property
    def alias(self) -> str:
        """The tool's server."""
        ...

    @property
    def owner(self) -> AgentKey:
        """The agent (a task it is handed is its alone)."""
        ...

    @property
    def sight(self) -> Sight | None:
        """The profile the agent reads the result's URIs back in."""
        ...

    @property
    def modern(self) -> bool: ...

    @property
    def capabilities(self) -> rpc.JsonObject | None:
        """What the agent declared it can answer."""
        ...

    @property
    def tasks(self) -> bool:
        """Whether the agent takes task handles."""
        ...

    @property
    def session(self) -> SessionMark | None:
        """The session with the server the result came in (a task it hands over is
        that session's)."""
        ...


# The last step, for a result that may hold links or a task handle: (its recipient,
# the result, whether it may hold links) -> the result, or why it failed after all.
Finish = Callable[[Recipient, Raw | dict[str, object], bool], Raw | dict[str, object] | Outage]


def result_for(
    raw: Raw, to: Recipient, budget: int, finish: Finish
) -> tuple[Raw | dict[str, object] | Outage, bool]:
    """A tool's result (as its server sent it) as ``to`` gets it, and whether it is an
    error: shaped (``shaped_for``), then finished by ``finish`` where it must be."""
    result, links, failed = shaped_for(raw, to, budget)
    if links or to.tasks:
        return finish(to, result, links), failed
    return result, failed


def shaped_for(raw: Raw, to: Recipient, budget: int) -> Shaped:
    """A tool's result shaped for ``to`` (``shape_call_result``): the result, whether
    it holds links to finish, and whether it is an error. Finishing is called for
    where the result holds links or ``to`` takes tasks. ``toolcall.Router.reply``
    writes this out for a call, with the head its scheduler read (its twin, held alike
    by tests/mcpd/agents/calls/test_toolcall_reply.py)."""
    return shape_call_result(
        raw,
        modern=to.modern,
        budget=budget,
        alias=to.alias,
        capabilities=to.capabilities,
        tasks=to.tasks,
    )


def shape_call_result(
    raw: Raw,
    *,
    modern: bool,
    budget: int,
    alias: str,
    capabilities: rpc.JsonObject | None = None,
    tasks: bool = False,
    head: mcp.CallToolResultKinds | mcp.CallToolResultHead | None = None,
) -> Shaped:
    """The result as the agent gets it, whether its content may hold a URI to rewrite
    (False only when every block's type is known and none is a resource), and whether
    it is an error (``isError``, the server's or mcpd's own). ``head``: the result's,
    as its server's scheduler read it (``Call.head``), not read again here when the
    result is short.

    ``structuredContent`` is passed on whole where the agent's era has a place for it
    (``result_eras``): it is for the host's code, which checks it against the tool's
    outputSchema (a cut or missing one fails the call there), and it repeats what
    ``content`` tells the model, which the budget cuts."""
    # Each character of text is at least one byte of JSON: a result no longer than the
    # budget cannot need cutting, and its texts need not be read.
    short = len(raw) <= budget
    if head is None or not short:
        try:
            head = _KINDS.decode(raw) if short else _HEADS.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            return _unreadable(raw, short, alias, modern)
        if not short:
            raw, head = meta_within(raw, head, budget)
            raw = blocks_within(raw, budget)
    kind = head.resultType
    if isinstance(kind, str) and kind != mcp.COMPLETE:
        return _not_complete(raw, head, kind, modern, alias, capabilities, tasks, budget)
    if head.content is None:
        # Absent or null: an agent's SDK that requires it would fail the call with its
        # own words, naming neither the server nor what is wrong.
        return _malformed(alias, modern, _NO_CONTENT)
    shaped = for_era(raw, head, bool(head.content), modern)
    if shaped is not raw and not head.content:
        # It may hold a text now, that the budget holds too: read again, as given.
        return shape_call_result(
            shaped,
            modern=modern,
            budget=budget,
            alias=alias,
            capabilities=capabilities,
            tasks=tasks,
        )
    raw = shaped
    failed = head.isError is True
    links = False
    if short:
        # Texts are not measured (they fit), only checked to be strings: their JSON
        # starts with a quote. Checked here, not in a function of its own: this is the
        # path nearly every call takes.
        for b in head.content or ():
            if b.type == "text":
                t = b.text
                if isinstance(t, Raw) and (not t or memoryview(t)[0] != _QUOTE):
                    return _not_strings(raw, alias, modern)
            elif b.type in _LINKS:
                links = True
    else:
        links, total = _measured(head)
        if total > budget:
            return _cut_to(raw, budget, total, alias, modern, links, failed)
    if modern and head.resultType is None:
        try:
            fixed = content_apart(raw)
        except msgspec.DecodeError as exc:
            return _malformed(alias, modern, exc)
        fixed["resultType"] = mcp.COMPLETE  # null is not a value agents accept
        return fixed, links, failed
    if modern and head.resultType is UNSET:
        return _with_result_type(raw), links, failed
    return raw, links, failed


def _unreadable(raw: Raw, short: bool, alias: str, modern: bool) -> Shaped:
    """A result whose head cannot be read: read again, for the failure in the words
    agents get."""
    try:
        rpc.decode_as(raw, mcp.CallToolResultKinds if short else mcp.CallToolResultHead)
    except rpc.InvalidParams as exc:
        return _malformed(alias, modern, exc)
    raise AssertionError("a result's head that failed to decode decoded after all")


def _measured(head: mcp.CallToolResultKinds | mcp.CallToolResultHead) -> tuple[bool, int]:
    """Whether a result's content may hold links, and how many characters of text it
    has that count against the budget (a text block's, an embedded resource's)."""
    links = False
    total = 0
    for b in head.content or ():
        if b.type == "text":
            if isinstance(b.text, str):
                total += len(b.text)
        elif b.type in _LINKS:
            links = True
            if isinstance(b, mcp.ContentHead) and isinstance(b.resource, mcp.ResourceHead):
                embedded = b.resource.text
                if isinstance(embedded, str):
                    total += len(embedded)
    return links, total


def _cut_to(
    raw: Raw, budget: int, total: int, alias: str, modern: bool, links: bool, failed: bool
) -> Shaped:
    """A result with ``total`` characters of text, cut to ``budget``."""
    try:
        result = content_apart(raw)
    except msgspec.DecodeError as exc:
        return _malformed(alias, modern, exc)
    _cut(result, budget, total)
    if modern:
        result["resultType"] = mcp.COMPLETE
    return result, links, failed


def content_apart(raw: Raw) -> dict[str, object]:
    """A tool's result (an object) with its ``content`` decoded, for mcpd to cut or
    rewrite, and its other members as the server wrote them: ``structuredContent`` and
    ``_meta`` go on byte for byte, their numbers as written. Raises msgspec.DecodeError
    for a content that cannot be read (a number no double holds)."""
    members: dict[str, Any] = _MEMBERS.decode(raw)
    content = members.get("content")
    if content is not None:
        members["content"] = msgspec.json.decode(content)
    return members


def _not_strings(raw: Raw, alias: str, modern: bool) -> Shaped:
    """A short result with a text that is not a string: the texts read as strings say
    what is wrong."""
    try:
        rpc.decode_as(raw, mcp.CallToolResultHead)
    except rpc.InvalidParams as exc:
        return _malformed(alias, modern, exc)
    raise AssertionError("a text that is not a string decoded as one")


def _not_complete(
    raw: Raw,
    head: mcp.CallToolResultFate,
    kind: str,
    modern: bool,
    alias: str,
    capabilities: rpc.JsonObject | None,
    tasks: bool,
    budget: int,
) -> Shaped:
    """``shape_call_result`` for a result whose ``resultType`` is not complete."""
    if (
        kind == mcp.INPUT_REQUIRED
        and modern
        and (
            features.asks_nothing(head.inputRequests, head.requestState)
            or features.answerable(head.inputRequests, capabilities)
        )
    ):
        # The agent can answer (or is asked nothing): it retries with its answers and the
        # same requestState, which mcpd forwards to the same server as a new request.
        return for_era(raw, head, True, modern), True, False
    if kind == mcp.INPUT_REQUIRED:
        text = unanswered_text(alias, head.inputRequests, budget)
        meta = {unanswered.META_KEY: unanswered.asked(head.inputRequests)}
        return _error(text, modern, meta), False, True
    if kind == "task" and tasks:
        # A task handle for an agent that takes them (agents.tasks).
        return for_era(raw, head, True, modern), True, False
    text = f"The tool server {alias!r} returned an unknown resultType {quote(str(kind))}."
    return _error(text, modern), False, True


def _with_result_type(raw: Raw) -> Raw:
    # Splice the field in rather than re-encode a result we otherwise pass through,
    # copying the result once (a decoded value starts at its brace).
    view = memoryview(raw)
    if not view or view[0] != _BRACE:
        view = memoryview(bytes(raw).lstrip())
    # Never an empty object: a result without content is refused before it comes here.
    return Raw(b"".join((b"{", _RESULT_TYPE_FIELD, b",", view[1:])))


def _cut(result: dict[str, Any], budget: int, total: int) -> None:
    kept: list[Any] = []
    remaining = budget
    for block in result.get("content") or []:
        text, embedded = _block_text(block)
        if text is not None:
            if remaining <= 0:
                continue
            if len(text) > remaining:
                text = text[:remaining]
                if embedded:
                    block = dict(block, resource=dict(block["resource"], text=text))
                else:
                    block = dict(block, text=text)
            remaining -= len(text)
        kept.append(block)
    kept.append(
        {
            "type": "text",
            "text": (
                f"[mcpd: {total - budget} more characters were cut here; this result was "
                f"{total} characters and the budget is {budget}. Ask the tool for a smaller "
                "part if you need the rest.]"
            ),
        }
    )
    result["content"] = kept


def _block_text(block: Any) -> tuple[str | None, bool]:
    """A block's text that counts against the budget, and whether it is an embedded
    resource's."""
    if not isinstance(block, dict):
        return None, False
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return block["text"], False
    resource = block.get("resource")
    if kind == "resource" and isinstance(resource, dict) and isinstance(resource.get("text"), str):
        return resource["text"], True
    return None, False


def _malformed(alias: str, modern: bool, why: Exception | str) -> Shaped:
    text = f"The tool server {alias!r} returned a malformed result: {why}"
    return _error(text, modern), False, True


def _error(text: str, modern: bool, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": True}
    if meta:
        result["_meta"] = meta
    if modern:
        result["resultType"] = mcp.COMPLETE
    return result
